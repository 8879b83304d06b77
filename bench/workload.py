"""The measured workload: which calls, with which arguments, in which order.

Every operation is measured in alternating blocks — empty calls back to back, then the operation
back to back — so each figure has its own transport floor, taken on the same server process within
milliseconds; on a shared 2-core machine that is the only fair floor. Samples run in rounds; in
each round every operation takes its share of samples in a fixed order, so slow phases of the
machine hit every operation alike, and the spread of the per-round medians says how noisy the run
was.

Mutations keep the graph at its size: ``create_entities`` adds as many entities as
``delete_entities`` removes (originals, with their relations); ``delete_observations`` removes what
``add_observations`` added; ``delete_relations`` removes what ``create_relations`` created. Targets
never repeat, and the entities holding the planted search terms are never touched, so every search
returns the same hits throughout (checked on the first sample of each operation).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mcp import Client

from bench.datagen import (
    BROAD_AT,
    BROAD_EVERY,
    BROAD_TERM,
    COMMON_EVERY,
    COMMON_TERM,
    RARE_TERM,
    TWO_WORDS,
    TWO_WORDS_EVERY,
    Graph,
    expected_hits,
)
from bench.servers import NOOP_TOOL, BenchError

Args = dict[str, Any]


@dataclass
class Op:
    """One measured operation: ``key`` (stable id in the JSON), ``label`` (table row), the tool,
    whether it is a point operation (constant work at any graph size), whether only our server
    has it, an argument factory by sample index and an optional check of the result (``entities``:
    how many entities the result must hold, checked by either client). ``needs``: arguments the
    tool's ``inputSchema`` must advertise for the operation to run on a server (see
    :func:`supported`)."""

    key: str
    label: str
    tool: str
    point: bool
    make_args: Callable[[int], Args]
    ours_only: bool = False
    check: Callable[[Any], str | None] | None = None
    entities: int | None = None
    needs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.check is None and self.entities is not None:
            self.check = _entities_count(self.entities)


PAGE_LIMIT = 1_000   # page size of the whole-graph walk (entities and relations per page)
FIRST_PAGE = 100     # the single-page read: a 100-entity page, whatever the graph's size


@dataclass(frozen=True)
class Read:
    """A read of the whole graph, timed after the rounds (few samples: the reply grows with the
    graph): ``args`` of ``read_graph``; with ``page_limit``, one sample is a walk through every
    page (``limit`` + each reply's ``nextCursor`` as ``cursor``)."""

    key: str
    label: str
    args: Args
    page_limit: int | None = None
    needs: tuple[str, ...] = ()


READS = [
    Read("read_graph_paged", f"read_graph page by page (limit {PAGE_LIMIT:,}, every page)", {},
         page_limit=PAGE_LIMIT, needs=("limit", "cursor")),
    Read("read_graph_summary", "read_graph view=summary (whole graph)", {"view": "summary"}, needs=("view",)),
    Read("read_graph", "read_graph (whole graph)", {}),
]


def advertised(tools: Any) -> dict[str, set[str]]:
    """Tool name → the argument names its ``inputSchema`` declares, from a ``tools/list`` result."""
    return {t.name: set((t.input_schema or {}).get("properties", {})) for t in tools.tools}


def supported(items: list[Any], tools: dict[str, set[str]], tool: str | None = None) -> list[Any]:
    """The operations (or reads, of ``tool``) a server can run: its tool exists and its
    ``inputSchema`` advertises every argument the operation needs (paging, the summary view)."""
    return [x for x in items if (tool or x.tool) in tools and set(x.needs) <= tools[tool or x.tool]]


@dataclass
class Samples:
    """Latencies in nanoseconds: ``op`` the operation, ``floor`` its paired empty calls; both
    indexed by round. ``op_validation`` / ``floor_validation``: of each sample, the nanoseconds
    the client spent validating the result against the tool's output schema (same shape; empty
    when not measured)."""

    op: list[list[int]] = field(default_factory=list)
    floor: list[list[int]] = field(default_factory=list)
    op_validation: list[list[int]] = field(default_factory=list)
    floor_validation: list[list[int]] = field(default_factory=list)


class ValidationClock:
    """Counts the time the official client spends in ``ClientSession.validate_tool_result``:
    checking each structured result against the tool's output schema with ``jsonschema`` (pure
    Python, so it grows with the size of the result). Wraps the method of one connected client;
    ``last`` is the time of the calls since the last :meth:`reset` (one call, or every page of a
    paged read), in nanoseconds."""

    def __init__(self, client: Client) -> None:
        self.last = 0
        session = client.session
        original = session.validate_tool_result

        async def timed(name: str, result: Any) -> None:
            start = time.perf_counter_ns()
            try:
                await original(name, result)
            finally:
                self.last += time.perf_counter_ns() - start

        session.validate_tool_result = timed  # type: ignore[method-assign]

    def reset(self) -> None:
        self.last = 0


def _entities_count(expected: int) -> Callable[[Any], str | None]:
    def check(result: Any) -> str | None:
        got = len((result.structured_content or {}).get("entities", []))
        return None if got == expected else f"expected {expected} entities, got {got}"
    return check


def floor_call(kind: str) -> tuple[str, Args]:
    """The empty call of a server: ``open_nodes`` with no names on ours (a real tool, through our
    whole tool path, touching no row); on the reference, whose every tool re-reads its whole file,
    a call to a tool that does not exist (answered by its SDK before any of its code runs)."""
    return ("open_nodes", {"names": []}) if kind == "ours" else (NOOP_TOOL, {})


def build_ops(graph: Graph, total: int, seed: int = 7) -> list[Op]:
    """The operations, with ``total`` distinct targets each (warm-up included)."""
    n = len(graph.entities)
    names = [e[0] for e in graph.entities]
    planted = {n // 2} | {i for i in range(n) if i % COMMON_EVERY == 50 or i % TWO_WORDS_EVERY == 500
                          or i % BROAD_EVERY == BROAD_AT}
    pool = [i for i in range(n) if i not in planted]
    rng = random.Random(seed + n)
    rng.shuffle(pool)
    if 3 * total > len(pool):
        raise BenchError(f"{total} samples per operation need {3 * total} distinct entities; the graph "
                         f"has {len(pool)} usable ones (use fewer samples or a larger graph)")
    deleted, updated, noted = pool[:total], pool[total:2 * total], pool[2 * total:3 * total]
    gone = set(deleted)
    stable = [i for i in range(n) if i not in gone]   # never deleted: safe to open and link to
    opened = [rng.choice(stable) for _ in range(total)]
    linked = [rng.choice(stable) for _ in range(total)]
    hits = expected_hits(n)

    def new_name(g: int) -> str:
        return f"Bench Ñewcomer ✨ {g} 新人"

    def note(g: int) -> str:
        return f"Bench note {g}: visited 東京 and Zürich ☕ on a Tuesday"

    def relation(g: int) -> Args:
        return {"from": new_name(g), "to": names[linked[g]], "relationType": "collaborates_with"}

    def obs0(i: int) -> str:
        return graph.entities[i][2][0]

    return [
        Op("search_rare", f"search_nodes, rare term ('{RARE_TERM}', 1 hit)", "search_nodes", True,
           lambda g: {"query": RARE_TERM}, entities=hits["rare"]),
        Op("search_common", f"search_nodes, common term ('{COMMON_TERM}', 1 % of entities)", "search_nodes",
           False, lambda g: {"query": COMMON_TERM}, entities=hits["common"]),
        Op("search_broad", f"search_nodes, broad term ('{BROAD_TERM}', 2.5 %), default reply", "search_nodes",
           False, lambda g: {"query": BROAD_TERM}, entities=hits["broad"]),
        Op("search_broad_summary", f"search_nodes view=summary ('{BROAD_TERM}', 2.5 %)", "search_nodes",
           False, lambda g: {"query": BROAD_TERM, "view": "summary"}, entities=hits["broad"], needs=("view",)),
        Op("search_two_words", f"search_nodes, two words ('{TWO_WORDS}', 0.1 %)", "search_nodes", False,
           lambda g: {"query": TWO_WORDS}, entities=hits["two_words"]),
        Op("search_words_mode", "search_nodes mode=words ('tea green', 0.1 %)", "search_nodes", False,
           lambda g: {"query": "tea green", "mode": "words"}, ours_only=True, entities=hits["two_words"],
           needs=("mode",)),
        Op("read_graph_page", f"read_graph, first page (limit {FIRST_PAGE})", "read_graph", False,
           lambda g: {"limit": FIRST_PAGE}, needs=("limit",)),
        Op("open_nodes", "open_nodes (1 name)", "open_nodes", True,
           lambda g: {"names": [names[opened[g]]]}, entities=1),
        Op("create_entities", "create_entities (1 entity, 5 observations)", "create_entities", True,
           lambda g: {"entities": [{"name": new_name(g), "entityType": "person", "observations": [
               f"Joined the benchmark in round {g} 🎉", "Speaks Português and 日本語",
               "Lives in Ljubljana", "Enjoys crème brûlée", f"Badge № {g}"]}]}),
        Op("create_relations", "create_relations (1 relation)", "create_relations", True,
           lambda g: {"relations": [relation(g)]}),
        Op("add_observations", "add_observations (1 observation)", "add_observations", True,
           lambda g: {"observations": [{"entityName": names[noted[g]], "contents": [note(g)]}]}),
        Op("update_observations", "update_observations (1 edit)", "update_observations", True,
           lambda g: {"updates": [{"entityName": names[updated[g]], "match": obs0(updated[g]),
                                   "replacement": obs0(updated[g]) + " (confirmed ✓)"}]}, ours_only=True),
        Op("delete_observations", "delete_observations (1 observation)", "delete_observations", True,
           lambda g: {"deletions": [{"entityName": names[noted[g]], "observations": [note(g)]}]}),
        Op("delete_relations", "delete_relations (1 relation)", "delete_relations", True,
           lambda g: {"relations": [relation(g)]}),
        Op("delete_entities", "delete_entities (1 entity + its relations)", "delete_entities", True,
           lambda g: {"entityNames": [names[deleted[g]]]}),
    ]


async def timed_call(client: Client, tool: str, args: Args, *, expect_error: bool = False) -> tuple[int, Any]:
    """One ``tools/call`` through the official client; returns (nanoseconds, result)."""
    start = time.perf_counter_ns()
    result = await client.call_tool(tool, args)
    elapsed = time.perf_counter_ns() - start
    if bool(result.is_error) != expect_error:
        text = " ".join(getattr(c, "text", "") for c in result.content)[:300]
        raise BenchError(f"{tool} {'succeeded' if expect_error else 'failed'} unexpectedly: {text}")
    return elapsed, result


async def measure_floor(client: Client, kind: str, count: int) -> list[int]:
    """``count`` empty calls back to back."""
    tool, args = floor_call(kind)
    return [(await timed_call(client, tool, args, expect_error=tool == NOOP_TOOL))[0] for _ in range(count)]


async def measure_noop(client: Client, count: int) -> list[int]:
    """``count`` calls to a tool that does not exist (answered with isError by both servers)."""
    return [(await timed_call(client, NOOP_TOOL, {}, expect_error=True))[0] for _ in range(count)]


async def warm_up(client: Client, kind: str, ops: list[Op], warmup: int) -> None:
    """Samples ``0..warmup-1`` of every operation, unmeasured (first-call costs, caches); the first
    result of each is checked (``Op.check``).

    Raises:
        BenchError: an error reply, or a first result that fails its check.
    """
    for g in range(warmup):
        for op in ops:
            if kind == "ours" or not op.ours_only:
                _, result = await timed_call(client, op.tool, op.make_args(g))
                if g == 0 and op.check is not None and (problem := op.check(result)):
                    raise BenchError(f"{kind} {op.key}: {problem}")


async def run_round(client: Client, kind: str, ops: list[Op], out: dict[str, Samples], *, round_index: int,
                    per_round: int, warmup: int, heavy_per_round: int | None = None, block: int = 10,
                    clock: ValidationClock | None = None) -> None:
    """One round: ``per_round`` samples of every operation (``heavy_per_round`` for operations
    whose result grows with the graph, when given), appended to ``out``.

    Calls go in alternating blocks of ``block``: empty calls back to back, then the operation back
    to back, then empty calls again… Each kind of call is timed in its own steady state (as an
    independent benchmark would time it), and the two stay within milliseconds of each other, so
    a busy moment of the machine hits both. Sample ``g`` of an operation always gets the same
    targets, so rounds never collide. With ``clock``, each sample's client-side validation time
    is recorded too."""
    floor_tool, floor_args = floor_call(kind)
    floor_error = floor_tool == NOOP_TOOL
    for op in ops:
        if kind != "ours" and op.ours_only:
            continue
        floors, times, floor_checks, checks = [], [], [], []
        count = per_round if op.point or heavy_per_round is None else min(per_round, heavy_per_round)
        j = 0
        while j < count:
            size = min(block, count - j)
            for _ in range(size):
                if clock:
                    clock.reset()
                floors.append((await timed_call(client, floor_tool, floor_args, expect_error=floor_error))[0])
                floor_checks.append(clock.last if clock else 0)
            for _ in range(size):
                g = warmup + round_index * per_round + j
                if clock:
                    clock.reset()
                elapsed, result = await timed_call(client, op.tool, op.make_args(g))
                checks.append(clock.last if clock else 0)
                if round_index == 0 and j == 0 and op.check is not None and (problem := op.check(result)):
                    raise BenchError(f"{kind} {op.key}: {problem}")
                times.append(elapsed)
                j += 1
        samples = out.setdefault(op.key, Samples())
        samples.op.append(times)
        samples.floor.append(floors)
        if clock:
            samples.op_validation.append(checks)
            samples.floor_validation.append(floor_checks)


async def timed_read(client: Client, read: Read) -> tuple[int, int, int, str | None]:
    """One sample of ``read``: (nanoseconds, entities received, pages, the server's error text or
    None). A paged read follows ``nextCursor`` to the last page, timed as a whole."""
    start = time.perf_counter_ns()
    entities = pages = 0
    cursor: str | None = None
    while True:
        args = dict(read.args)
        if read.page_limit:
            args["limit"] = read.page_limit
            if cursor:
                args["cursor"] = cursor
        result = await client.call_tool("read_graph", args)
        if result.is_error:
            return 0, 0, 0, " ".join(getattr(c, "text", "") for c in result.content)[:400]
        content = result.structured_content or {}
        entities += len(content.get("entities", []))
        pages += 1
        cursor = content.get("nextCursor") if read.page_limit else None
        if not cursor:
            return time.perf_counter_ns() - start, entities, pages, None


async def run_read(client: Client, kind: str, read: Read, count: int, entities: int, *,
                   warmup: bool = True, clock: ValidationClock | None = None) -> Samples | str:
    """``count`` samples of ``read``, each after a block of ten empty calls (the floor, in its
    steady state as for every other row: a lone empty call right after a read_graph still pays for
    the giant reply before it); checks the entity count. With ``clock``, each sample's output-schema
    check is recorded too (``Samples.op_validation``).

    Returns:
        The samples, or the server's refusal (its error text) when it answers with a tool error
        (a reply over its size bound).

    Raises:
        BenchError: a reply that holds the wrong number of entities.
    """
    samples = Samples(op=[[]], floor=[[]])
    if warmup:
        *_, refused = await timed_read(client, read)
        if refused:
            return refused
    checks: list[int] = []
    for _ in range(count):
        samples.floor[0] += await measure_floor(client, kind, 10)
        if clock:
            clock.reset()
        elapsed, got, _, refused = await timed_read(client, read)
        if refused:
            return refused
        if got != entities:
            raise BenchError(f"{kind} {read.key} returned {got} entities, expected {entities}")
        samples.op[0].append(elapsed)
        checks.append(clock.last if clock else 0)
    if clock:
        samples.op_validation.append(checks)
    return samples
