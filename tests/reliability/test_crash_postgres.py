"""Crash safety on PostgreSQL: replicas SIGKILLed at random moments while the others keep writing.

Four ``graph-memory`` processes (stdio, ``MEMORY_DATABASE_URL``) share one database of the
session's throwaway cluster, each driving its own :class:`~.conftest.Lane` (its own entities and
relations, plus observations of its own on shared hub entities, alone or together with its own
entities in one call). Each lane kills its own process over and over and restarts it
(:func:`~.crashes.crash_lanes`). After every restart and at the end: every acknowledged write is
present, every call in flight at a kill happened completely or not at all, nothing is stored twice
(:meth:`Lane.settle`), search finds stored facts in ``substring`` and ``words`` mode, and the search
documents, uniqueness keys and migration history agree with the rows
(:func:`~.crashes.postgres_integrity_problems`).

Also: replicas killed while starting together on an empty database (migrations, the first-start
import of a legacy file) — the others start, the import happens once; and a streamable-HTTP
replica killed mid-write while a stdio replica keeps writing.

Default run: 12 kills of storming replicas plus the start and HTTP kills; slow run (``-m slow``):
120+ kills.
"""

from __future__ import annotations

import json
import os
import random
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from .conftest import SLOW, Lane, RawServer, drive_until_gone
from .crashes import HttpServer, Killer, Spawn, Target, check_search, crash_lanes
from pgcluster import Cluster

HUBS = ("hub:0", "hub:1", "hub:2")


def _make_hubs(server: RawServer) -> None:
    server.call_ok("create_entities", {"entities": [{"name": h, "entityType": "hub", "observations": []}
                                                    for h in HUBS]})


def _check_whole_graph(payload: dict[str, Any], lanes: list[Lane]) -> None:
    """Every lane's view equals its model, and nothing else is stored: every entity is a hub or a
    lane's, every hub observation a lane's."""
    for lane in lanes:
        lane.check(payload)
    prefixes = tuple(lane.prefix for lane in lanes)
    strays = [e["name"] for e in payload["entities"] if e["name"] not in HUBS and not e["name"].startswith(prefixes)]
    assert strays == []
    hub_observations = [o for e in payload["entities"] if e["name"] in HUBS for o in e["observations"]]
    assert [o for o in hub_observations if not o.startswith(prefixes)] == []
    assert len(hub_observations) == sum(len(lane.model.entities[h][1]) for lane in lanes for h in HUBS)


def _storm(spawn: Spawn, target: Target, *, kills_per_lane: int, seed: int) -> dict[str, dict[str, Any]]:
    """Four lanes, four replicas, ``kills_per_lane`` kills each; checks the whole graph at the end."""
    first = target.start(spawn)
    first.initialize()
    _make_hubs(first)
    lanes = [Lane(f"{letter}:", seed=seed + i, target_size=100, hubs=HUBS) for i, letter in enumerate("ABCD")]
    started = time.monotonic()
    results = crash_lanes(spawn, target, lanes, kills_per_lane=kills_per_lane, max_delay=0.3, max_acks=30, window=6,
                          seed=seed)
    payload = first.read_graph()  # a replica that stayed up the whole time sees it all
    _check_whole_graph(payload, lanes)
    assert target.integrity_problems() == []
    assert first.close() == 0
    totals = {key: sum(r[key] for r in results.values()) for key in next(iter(results.values()))}
    print(f"postgres crash storm: {totals} in {time.monotonic() - started:.1f}s")
    assert totals["kills"] == 4 * kills_per_lane
    return totals


def test_replicas_killed_during_write_storms_lose_no_acknowledged_write(spawn: Spawn, postgres_url: str,
                                                                       tmp_path: Path) -> None:
    totals = _storm(spawn, Target(tmp_path / "memory.jsonl", postgres_url), kills_per_lane=3, seed=21)
    assert totals["acked"] >= 12, totals  # each storm wrote before its kill


@SLOW
def test_replicas_killed_many_times_during_write_storms_lose_no_acknowledged_write(
        spawn: Spawn, postgres_url: str, tmp_path: Path) -> None:
    kills_per_lane = int(os.environ.get("GM_CRASH_KILLS_PER_LANE", "30"))
    totals = _storm(spawn, Target(tmp_path / "memory.jsonl", postgres_url), kills_per_lane=kills_per_lane, seed=41)
    assert totals["kills"] >= 120 or kills_per_lane < 30


# -- kills while starting ----------------------------------------------------------------------------

def _legacy_file(path: Path, entities: int) -> dict[str, list[str]]:
    """A reference-format memory.jsonl of ``entities`` entities in a chain; returns ``{name: observations}``."""
    graph = {f"legacy {i}": [f"fact {i}.{j} of the legacy memory" for j in range(3)] for i in range(entities)}
    lines = [json.dumps({"type": "entity", "name": n, "entityType": "old", "observations": o})
             for n, o in graph.items()]
    lines += [json.dumps({"type": "relation", "from": f"legacy {i}", "to": f"legacy {i + 1}", "relationType": "next"})
              for i in range(entities - 1)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return graph


def _wait_for_a_connection(cluster: Cluster, database: str, timeout: float = 60.0) -> None:
    """Until some graph-memory process has connected to ``database`` (its start has reached the
    database: migrations and the first-start import come next)."""
    import psycopg

    deadline = time.monotonic() + timeout
    with psycopg.connect(host=str(cluster.base), port=cluster.port, user="postgres", dbname="postgres",
                         autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND "
                               "application_name = 'graph-memory'", (database,)).fetchone()
            if row is not None and row[0] > 0:
                return
            time.sleep(0.005)
    raise AssertionError(f"no graph-memory process connected to {database} within {timeout}s")


def _import_owed(cluster: Cluster, database: str) -> bool:
    """Whether the first-start import of ``database`` is still owed (not committed yet)."""
    import psycopg

    with psycopg.connect(host=str(cluster.base), port=cluster.port, user="postgres", dbname=database,
                         autocommit=True) as conn:
        if conn.execute("SELECT to_regclass('legacy_first_start') IS NULL").fetchone() == (True,):
            return True  # not even migrated
        return conn.execute("SELECT action FROM legacy_first_start").fetchone() == ("import",)


def _kill_while_starting(spawn: Spawn, cluster: Cluster, tmp_path: Path, *, attempts: int,
                         seed: int) -> dict[str, int]:
    """Each attempt: a new empty database and a legacy file, four replicas started at once, three
    of them SIGKILLed at random moments after the first reached the database (while migrating or
    importing); the fourth must start and see the whole legacy graph, imported once; replicas
    started again in place of the killed ones too. Returns how many were killed, and how many of
    those kills came before the import had committed."""
    rng = random.Random(seed)
    killed = {"kills": 0, "before_the_import_committed": 0}
    for attempt in range(attempts):
        name = cluster.create_database()
        try:
            legacy = tmp_path / f"attempt-{attempt}" / "memory.jsonl"
            legacy.parent.mkdir()
            graph = _legacy_file(legacy, 1500)
            target = Target(legacy, cluster.url(name))
            replicas = [target.start(spawn) for _ in range(4)]
            _wait_for_a_connection(cluster, name)
            victims = rng.sample(replicas, 3)
            for victim in victims:
                time.sleep(rng.uniform(0.0, 0.4))
                victim.kill()
                killed["kills"] += 1
                killed["before_the_import_committed"] += _import_owed(cluster, name)
            survivors = [r for r in replicas if r not in victims] + [target.start(spawn) for _ in victims]
            for server in survivors:
                server.initialize(timeout=120)
                payload = server.read_graph()
                assert {e["name"]: e["observations"] for e in payload["entities"]} == graph
                assert len(payload["relations"]) == len(graph) - 1
            _check_search_of_legacy(survivors[0])
            for server in survivors:
                assert server.close() == 0, server.stderr_text()[-2000:]
            assert _import_records(target) == ["first_start"]
            assert target.integrity_problems() == []
        finally:
            cluster.drop_database(name)
    return killed


def _check_search_of_legacy(server: RawServer) -> None:
    found = server.call_ok("search_nodes", {"query": "fact 1499.2 of the legacy"})
    assert [e["name"] for e in found["entities"]] == ["legacy 1499"]
    found = server.call_ok("search_nodes", {"query": "legacy 1499.2 fact", "mode": "words"})
    assert [e["name"] for e in found["entities"]] == ["legacy 1499"]


def _import_records(target: Target) -> list[str]:
    import psycopg

    assert target.url is not None
    with psycopg.connect(target.url) as conn:
        return [str(kind) for (kind,) in conn.execute("SELECT kind FROM legacy_imports ORDER BY id")]


def test_replicas_killed_while_starting_together_leave_the_others_to_migrate_and_import_once(
        spawn: Spawn, postgres_cluster: Cluster, tmp_path: Path) -> None:
    started = time.monotonic()
    killed = _kill_while_starting(spawn, postgres_cluster, tmp_path, attempts=2, seed=5)
    print(f"postgres start kills: {killed} in {time.monotonic() - started:.1f}s")
    assert killed["kills"] == 6


@SLOW
def test_replicas_killed_while_starting_together_many_times(spawn: Spawn, postgres_cluster: Cluster,
                                                            tmp_path: Path) -> None:
    started = time.monotonic()
    killed = _kill_while_starting(spawn, postgres_cluster, tmp_path, attempts=10, seed=6)
    print(f"postgres start kills: {killed} in {time.monotonic() - started:.1f}s")
    assert killed["kills"] == 30
    assert killed["before_the_import_committed"] > 0  # some kills really hit a start in progress



def test_the_integrity_check_finds_a_stale_search_document_and_a_wrong_key(spawn: Spawn, postgres_url: str,
                                                                         tmp_path: Path) -> None:
    """postgres_integrity_problems is not a check that always passes: it reports a document that no
    longer matches its rows, one of a deleted entity, and a uniqueness key that is not its text's."""
    import psycopg

    target = Target(tmp_path / "memory.jsonl", postgres_url)
    server = target.start(spawn)
    server.initialize()
    server.call_ok("create_entities", {"entities": [
        {"name": "Ada", "entityType": "Person", "observations": ["Likes TEA", "İstanbul"]},
        {"name": "Bob", "entityType": "person", "observations": []}]})
    assert server.close() == 0
    assert target.integrity_problems() == []
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE entity_search DROP CONSTRAINT entity_search_entity_id_fkey")
        conn.execute("UPDATE entity_search SET observations = 'likes tea' WHERE name = 'ada'")
        conn.execute("INSERT INTO entity_search VALUES (999, 'gone', 'x', '')")
        conn.execute("UPDATE observations SET content_key = sha256('other'::bytea) WHERE content = 'Likes TEA'")
        conn.execute("DELETE FROM entity_search WHERE name = 'bob'")
    problems = target.integrity_problems()
    assert len(problems) == 4, problems
    assert any("'Ada': search document" in p for p in problems)
    assert any("'Bob': search document None" in p for p in problems)
    assert "search document 999 of no entity" in problems
    assert any("content_key" in p for p in problems)


# -- a streamable-HTTP replica killed mid-write --------------------------------------------------------

def test_an_http_replica_killed_mid_write_loses_no_acknowledged_write(spawn: Spawn, postgres_url: str,
                                                                     tmp_path: Path) -> None:
    """A ``serve --transport http`` replica is SIGKILLed mid-storm three times (and started again)
    while a stdio replica on the same database keeps writing; the stdio replica sees every
    acknowledged HTTP write, each in-flight HTTP call whole or not at all, and its own writes intact."""
    target = Target(tmp_path / "memory.jsonl", postgres_url)
    survivor = target.start(spawn)
    survivor.initialize()
    _make_hubs(survivor)
    lane_h, lane_s = Lane("H:", seed=61, hubs=HUBS), Lane("S:", seed=62, hubs=HUBS)
    rng = random.Random(63)
    pending: list[Any] = []
    servers: list[HttpServer] = []
    started, in_flight = time.monotonic(), 0
    try:
        for kill in range(3):
            http = HttpServer(target.env(), tmp_path / f"http-{kill}.stderr", window=6)
            servers.append(http)
            http.initialize(timeout=120)
            lane_h.settle(pending, survivor.read_graph())
            before = lane_h.acked
            with ThreadPoolExecutor(1) as pool:
                writer = pool.submit(drive_until_gone, survivor, lane_s, window=4, max_ops=40)
                killer = Killer(http, lane_h, acks=rng.randint(1, 20), delay=rng.uniform(0.0, 0.3))
                try:
                    pending = drive_until_gone(http, lane_h, window=6)
                finally:
                    killer.cancel()
                    http.kill()
                assert writer.result() == [], "the stdio replica's writes did not all complete"
            assert lane_h.acked > before, "the HTTP replica acknowledged nothing before its kill"
            in_flight += len(pending)
            payload = survivor.read_graph()
            lane_s.check(payload)
            assert target.integrity_problems() == []
        lane_h.settle(pending, survivor.read_graph())
        _check_whole_graph(survivor.read_graph(), [lane_h, lane_s])
        check_search(survivor, lane_h)
        assert survivor.close() == 0
    finally:
        for server in servers:
            if server.alive():
                server.kill()
    print(f"postgres HTTP kills: 3, {lane_h.acked} HTTP writes acknowledged, {in_flight} in flight at the kills, "
          f"in {time.monotonic() - started:.1f}s")
