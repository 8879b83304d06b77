"""Benchmark search_nodes over the MCP stdio transport (prints numbers; not a test).

Builds a database of 100k entities × 5 observations of mixed-language text through the bulk import
path (``importer.load_graph``), starts ``graph-memory`` as a stdio subprocess on it, connects with
the official ``mcp.Client``, and reports p50/p95 of:

- the transport floor: ``open_nodes`` with ``names=[]`` (a tool call that does almost nothing);
- ``substring`` and ``words`` queries that match one entity (selective);
- a ``substring`` query that matches 1% of the entities (and the same in ``words`` mode).

Targets (issue 4): selective p50 within 1.5× the floor, the 1% query within 3×.

Usage::

    /tmp/gmvenv/bin/python bench/search_bench.py [--entities 100000] [--relations 0]
        [--db FILE] [--rebuild] [--rounds 200] [--mode auto|legacy]

The database is kept (outside the repository by default) and reused when its parameters match.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graph_memory.db.store import Store
from graph_memory.importer import load_graph
from graph_memory.legacy import LegacyGraph
from graph_memory.models import Entity, Relation

SEED = 20261130
OBSERVATIONS = 5
RARE_WORD = "harpsichord"   # in one observation of every 100th entity: the 1% query
FIRST = ["Léa", "Chloé", "Nadia", "Farah", "Quentin", "Mëlissa", "Vikram", "Tomás", "Søren", "Zoë", "İlker",
         "Ağça", "Łukasz", "José", "Ægir", "Björn", "Ingrid", "Aiko", "Mei", "Kwame", "Olúwadé", "Σοφία",
         "Дмитрий", "张伟", "李娜", "Ana", "Ömer", "François", "Nguyễn", "Priya"]
LAST = ["Smith", "Rossi", "García", "Okafor", "Jensen", "Haddad", "Müller", "Nowak", "Kowalski", "Dubois",
        "Yılmaz", "Silva", "Tanaka", "Kim", "Papadopoulos", "Иванов", "王", "Øster", "Ñúñez", "Brontë"]
TYPES = ["person", "organization", "project", "event", "place", "document"]
WORDS = ["coffee", "tea", "café", "naïve", "résumé", "meeting", "deadline", "budget", "roadmap", "Zürich", "München",
         "São", "Paulo", "Kraków", "東京", "서울", "Москва", "straße", "garçon", "piñata", "fjord",
         "smörgåsbord", "jalapeño", "über", "façade", "déjà", "vu", "crème", "brûlée", "kayak", "violin",
         "guitar", "marathon", "sourdough", "espresso", "matcha", "python", "rust", "typescript",
         "kubernetes", "sqlite", "postgres", "migration", "release", "review", "incident", "on-call",
         "vacation", "birthday", "anniversary", "allergic", "peanuts", "vegetarian", "timezone",
         "UTC+09:00", "Friday", "Monday", "quarterly", "OKR", "hiring", "mentor", "☕", "🚀", "🎉", "✅", "日本語",
         "中文", "العربية", "हिन्दी", "ελληνικά"]
TEMPLATES = [
    "Prefers {w} over {w} in the {w}",
    "Mentioned {w} and {w} during the {w} on {d}",
    "Works on the {w} {w} project since {y}",
    "Lives near {w}; enjoys {w} and {w}",
    "Said \"let's revisit {w} in Q{q}\" — follow up about {w}",
    "Owns a {w} {w}; allergic to {w}",
    "Timezone UTC{tz}; usually online after {h}:00",
]


def observation(rng: random.Random) -> str:
    text = rng.choice(TEMPLATES)
    while "{w}" in text:
        text = text.replace("{w}", rng.choice(WORDS), 1)
    return text.format(d=rng.choice(["Monday", "Friday", "12 March", "1 Oct"]), y=rng.randint(2005, 2026),
                       q=rng.randint(1, 4), tz=rng.choice(["+09:00", "-05:00", "+01:00", "+05:30"]),
                       h=rng.randint(6, 22))


def name_of(i: int) -> str:
    return f"{FIRST[i % len(FIRST)]}_{LAST[(i // len(FIRST)) % len(LAST)]}_{i}"


def build_graph(entities: int, relations: int) -> LegacyGraph:
    rng = random.Random(SEED)
    items: list[Entity] = []
    for i in range(entities):
        observations = list(dict.fromkeys(observation(rng) for _ in range(OBSERVATIONS)))
        while len(observations) < OBSERVATIONS:
            observations.append(f"{observation(rng)} #{len(observations)}")
        if i % 100 == 7:
            observations[rng.randrange(OBSERVATIONS)] += f"; plays the {RARE_WORD}"
        items.append(Entity(name_of(i), rng.choice(TYPES), observations))
    edges = {(name_of(rng.randrange(entities)), name_of(rng.randrange(entities)), rng.choice(
        ["knows", "works_with", "reports_to", "attended", "owns"])) for _ in range(relations)}
    return LegacyGraph(items, [Relation(*e) for e in edges])


def prepare(db: Path, entities: int, relations: int, rebuild: bool) -> None:
    meta = db.with_suffix(".json")
    wanted = {"entities": entities, "relations": relations, "seed": SEED, "observations": OBSERVATIONS}
    if not rebuild and db.exists() and meta.exists() and json.loads(meta.read_text()) == wanted:
        print(f"reusing {db}", file=sys.stderr)
        return
    for path in (db, Path(f"{db}-wal"), Path(f"{db}-shm"), meta):
        path.unlink(missing_ok=True)
    db.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    legacy = build_graph(entities, relations)
    generated = time.perf_counter()
    store = Store.open(db)
    try:
        load_graph(store, legacy, source="search_bench")
    finally:
        store.close()
    meta.write_text(json.dumps(wanted))
    print(f"built {db}: {entities} entities, {entities * OBSERVATIONS} observations, {len(legacy.relations)} "
          f"relations (generate {generated - started:.1f} s, bulk import {time.perf_counter() - generated:.1f} s)",
          file=sys.stderr)


async def measure(client: Any, cases: list[Case], rounds: int) -> dict[str, list[float]]:
    """Latencies in ms per case. Cases run interleaved (one call each per round, heavy cases every
    ``every``-th round) so that load from elsewhere on the machine hits every case alike."""
    samples: dict[str, list[float]] = {case.label: [] for case in cases}
    for round_ in range(-5, rounds):  # five warm-up rounds
        for case in cases:
            if round_ % case.every:
                continue
            started = time.perf_counter()
            await client.call_tool(case.tool, case.arguments)
            if round_ >= 0:
                samples[case.label].append((time.perf_counter() - started) * 1000)
    return samples


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


@dataclass(frozen=True)
class Case:
    label: str
    tool: str
    arguments: dict[str, Any]
    target: float | None = None   # target p50 as a multiple of the floor's p50
    every: int = 1                # run in every n-th round only (heavy cases)


async def run(db: Path, entities: int, rounds: int, mode: str) -> None:
    from mcp import Client, StdioServerParameters

    command = shutil.which("graph-memory", path=str(Path(sys.executable).parent)) or "graph-memory"
    env = {**os.environ, "MEMORY_FILE_PATH": str(db), "MEMORY_LOG_LEVEL": "warning"}
    params = StdioServerParameters(command=command, args=[], env=env)
    target = name_of(entities * 42 // 100 + 3)
    first, last, number = target.split("_")
    heavy = 4
    cases = [
        Case("floor: open_nodes names=[]", "open_nodes", {"names": []}),
        Case("substring selective (name)", "search_nodes", {"query": target}, 1.5),
        Case("substring selective (part)", "search_nodes", {"query": f"{last.lower()}_{number}"}, 1.5),
        Case("words selective", "search_nodes", {"query": f"{number} {first.upper()} {last}", "mode": "words"}, 1.5),
        Case("fts selective", "search_nodes", {"query": f'name: "{number}" AND {last}', "mode": "fts"}),
        Case("substring 1%", "search_nodes", {"query": RARE_WORD.upper()}, 3.0, heavy),
        Case("words 1%", "search_nodes", {"query": f"plays {RARE_WORD}", "mode": "words"}, 3.0, heavy),
        Case("substring 1%, limit 10", "search_nodes", {"query": RARE_WORD, "limit": 10}),
    ]
    async with Client(params, mode=mode) as client:  # type: ignore[arg-type]
        shape = {}
        for case in cases:
            result = await client.call_tool(case.tool, case.arguments)
            if result.is_error:
                raise SystemExit(f"{case.label}: {result.content[0].text}")
            shape[case.label] = (len(result.structured_content["entities"]), len(result.content[0].text))
        samples = await measure(client, cases, rounds)
    floor = statistics.median(samples[cases[0].label])
    print(f"\nsearch_nodes over MCP stdio ({mode}), {entities} entities × {OBSERVATIONS} observations, {db}")
    print(f"{'case':30} {'hits':>5} {'bytes':>8} {'calls':>5} {'p50 ms':>7} {'p95 ms':>7} {'p50/floor':>9}  target")
    for case in cases:
        values = samples[case.label]
        p50 = statistics.median(values)
        ratio = p50 / floor
        verdict = "" if case.target is None else f"≤{case.target:.1f}× {'ok' if ratio <= case.target else 'MISSED'}"
        hits, size = shape[case.label]
        print(f"{case.label:30} {hits:>5} {size:>8} {len(values):>5} {p50:>7.2f} {percentile(values, 0.95):>7.2f} "
              f"{ratio:>8.2f}×  {verdict}")
    print(f"floor p50 = {floor:.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entities", type=int, default=100_000)
    parser.add_argument("--relations", type=int, default=0, help="random relations between the entities")
    parser.add_argument("--db", type=Path, help="database file (default /tmp/graph-memory-bench/bench-E-R.db)")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the database even if it matches")
    parser.add_argument("--rounds", type=int, default=200,
                        help="measurement rounds (one call per case each; 1%% cases every 4th round)")
    parser.add_argument("--mode", default="auto", choices=["auto", "legacy"], help="MCP protocol generation")
    args = parser.parse_args()
    db = (args.db or Path(f"/tmp/graph-memory-bench/bench-{args.entities}-{args.relations}.db")).expanduser().absolute()
    prepare(db, args.entities, args.relations, args.rebuild)
    asyncio.run(run(db, args.entities, args.rounds, args.mode))


if __name__ == "__main__":
    main()
