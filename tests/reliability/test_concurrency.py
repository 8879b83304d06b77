"""Many writers: concurrent calls on one session, and several server processes on one file.

Every acknowledged write must be present exactly once, every call must succeed (no "database is
locked" ever reaches a caller: the store takes the write lock with ``BEGIN IMMEDIATE``, waits the
busy timeout and retries the whole transaction), and concurrent additions to the same entity must
not overwrite each other (the reference server's lost-update failure).
"""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from .conftest import SLOW, Lane, integrity_problems, server_command, server_env

pytestmark = pytest.mark.anyio

SEEDS, DELETABLE = 10, 5   # seed observations per base entity; the first DELETABLE may be deleted


def _as_dict(result: Any) -> dict[str, Any]:
    """An SDK CallToolResult as the wire-shaped dict the lane helpers read."""
    return {"isError": bool(result.is_error), "structuredContent": result.structured_content,
            "content": [{"text": getattr(c, "text", "")} for c in result.content]}


def _locked(text: str) -> bool:
    return any(word in text.lower() for word in ("locked", "busy"))


# -- (a) one server, concurrent calls -------------------------------------------------------------


async def _concurrent_mixed_calls(clients: list[Any], calls: int, seed: int) -> None:
    """``calls`` mixed writes (and some reads) at once, spread over ``clients`` of one server;
    then the graph must be exactly what the acknowledged calls imply."""
    rng = random.Random(seed)
    bases = 20
    first = clients[0]
    seed_result = await first.call_tool("create_entities", {"entities": [
        {"name": f"base{i}", "entityType": "base", "observations": [f"seed{i}.{j}" for j in range(SEEDS)]}
        for i in range(bases)]})
    assert not seed_result.is_error
    deletable = [(i, j) for i in range(bases) for j in range(DELETABLE)]
    updatable = [(i, j) for i in range(bases) for j in range(DELETABLE, SEEDS)]
    rng.shuffle(deletable)
    rng.shuffle(updatable)

    plans: list[tuple[str, dict[str, Any]]] = []
    for n in range(calls):
        kind = n % 6
        if kind == 0:
            plans.append(("create_entities", {"entities": [
                {"name": f"new{n}", "entityType": "new", "observations": [f"new{n} fact"]},
                {"name": f"race{n % 7}", "entityType": f"racer{n}", "observations": [f"by {n}"]}]}))
        elif kind == 1:
            plans.append(("add_observations", {"observations": [
                {"entityName": f"base{n % bases}", "contents": [f"add{n}.a", f"add{n}.b"]},
                {"entityName": f"base{(n + 7) % bases}", "contents": [f"add{n}.c"]}]}))
        elif kind == 2:
            a, b = rng.randrange(bases), rng.randrange(bases)
            plans.append(("create_relations", {"relations": [{"from": f"base{a}", "to": f"base{b}",
                                                              "relationType": f"rel{n}"}]}))
        elif kind == 3 and deletable:
            i, j = deletable.pop()
            plans.append(("delete_observations", {"deletions": [{"entityName": f"base{i}",
                                                                 "observations": [f"seed{i}.{j}"]}]}))
        elif kind == 4 and updatable:
            i, j = updatable.pop()
            plans.append(("update_observations", {"updates": [{"entityName": f"base{i}", "match": f"seed{i}.{j}",
                                                               "replacement": f"updated{i}.{j}"}]}))
        else:
            plans.append(rng.choice([("read_graph", {}), ("search_nodes", {"query": "seed"}),
                                     ("open_nodes", {"names": [f"base{n % bases}", f"new{n - 5}"]})]))

    results: list[Any] = [None] * len(plans)

    async def run(index: int, tool: str, arguments: dict[str, Any]) -> None:
        results[index] = await clients[index % len(clients)].call_tool(tool, arguments)

    async with anyio.create_task_group() as tg:
        for index, (tool, arguments) in enumerate(plans):
            tg.start_soon(run, index, tool, arguments)

    failures = [(plans[i][0], r.content[0].text) for i, r in enumerate(results) if r.is_error]
    assert not failures, failures[:5]

    graph = (await first.call_tool("read_graph", {})).structured_content
    by_name = {e["name"]: e for e in graph["entities"]}
    assert len(by_name) == len(graph["entities"]), "an entity was stored twice"

    # create_entities: every new entity once; each race name created by exactly one call.
    race_creators: dict[str, list[int]] = {}
    for index, (tool, arguments) in enumerate(plans):
        if tool != "create_entities":
            continue
        created = [e["name"] for e in results[index].structured_content["entities"]]
        assert arguments["entities"][0]["name"] in created
        for name in created:
            if name.startswith("race"):
                race_creators.setdefault(name, []).append(index)
        assert by_name[arguments["entities"][0]["name"]]["observations"] == [arguments["entities"][0]
                                                                              ["observations"][0]]
    for name, creators in race_creators.items():
        assert len(creators) == 1, f"{name} reported created by {len(creators)} calls"
        winner = plans[creators[0]][1]["entities"][1]
        assert by_name[name]["entityType"] == winner["entityType"]
    assert set(race_creators) == {f"race{k}" for k in range(min(7, (calls + 5) // 6))}

    # Base entities: remaining seeds in place (updated ones edited in place), then every addition.
    for i in range(bases):
        expected_seeds = []
        for j in range(SEEDS):
            seed_text = f"seed{i}.{j}"
            deleted = any(t == "delete_observations" and a["deletions"][0]["observations"] == [seed_text]
                          for t, a in plans)
            updated = any(t == "update_observations" and a["updates"][0]["match"] == seed_text for t, a in plans)
            if not deleted:
                expected_seeds.append(f"updated{i}.{j}" if updated else seed_text)
        observations = by_name[f"base{i}"]["observations"]
        assert observations[:len(expected_seeds)] == expected_seeds
        expected_adds = {c for t, a in plans if t == "add_observations"
                         for item in a["observations"] if item["entityName"] == f"base{i}" for c in item["contents"]}
        tail = observations[len(expected_seeds):]
        assert len(tail) == len(set(tail)) and set(tail) == expected_adds, f"base{i}: lost or extra additions"

    wanted = {(a["relations"][0]["from"], a["relations"][0]["to"], a["relations"][0]["relationType"])
              for t, a in plans if t == "create_relations"}
    got = [(r["from"], r["to"], r["relationType"]) for r in graph["relations"]]
    assert len(got) == len(set(got)) and set(got) == wanted


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_200_concurrent_calls_on_one_session(server: Any, store: Any, mode: str) -> None:
    from mcp import Client

    async with Client(server, mode=mode, cache=None) as client:
        await _concurrent_mixed_calls([client], calls=200, seed=1)
    assert store.integrity_problems() == []


async def test_concurrent_calls_on_many_sessions_of_one_server(server: Any, store: Any) -> None:
    from mcp import Client

    async with Client(server, cache=None) as a, Client(server, mode="legacy", cache=None) as b, \
            Client(server, cache=None) as c:
        await _concurrent_mixed_calls([a, b, c], calls=300, seed=2)
    assert store.integrity_problems() == []


@SLOW
async def test_2000_concurrent_calls_on_one_session(server: Any, store: Any) -> None:
    from mcp import Client

    async with Client(server, cache=None) as client:
        await _concurrent_mixed_calls([client], calls=2000, seed=3)
    assert store.integrity_problems() == []


# -- (b) several server processes on one database file --------------------------------------------


SHARED, RACES = 4, 40


class LockHog:
    """Another program on the same file that keeps grabbing the write lock for a while
    (``BEGIN IMMEDIATE`` held ``hold`` seconds, then a pause), like a backup or a sqlite3 shell."""

    def __init__(self, db: Path, hold: tuple[float, float], pause: tuple[float, float]) -> None:
        self.db, self.hold, self.pause = db, hold, pause
        self.stop = threading.Event()
        self.grabs = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import apsw

        conn = apsw.Connection(str(self.db))
        conn.set_busy_timeout(5_000)
        rng = random.Random(0)
        try:
            while not self.stop.is_set():
                conn.execute("BEGIN IMMEDIATE")
                self.grabs += 1
                time.sleep(rng.uniform(*self.hold))
                conn.execute("COMMIT")
                self.stop.wait(rng.uniform(*self.pause))
        finally:
            conn.close()

    def __enter__(self) -> LockHog:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(30)


async def _process_storm(db: Path, tmp_path: Path, *, processes: int, writes: int, workers: int,
                         busy_timeout_ms: int | None = None, hog: tuple[float, float] | None = None
                         ) -> dict[str, Any]:
    """``processes`` real ``graph-memory`` stdio servers on ``db``, driven through the SDK client
    (alternating protocol generations), each doing ``writes`` mixed writes with ``workers`` in
    flight, plus contention on purpose: additions to the same shared entities and creations of
    the same names from every process. Returns counters; fails on any error result."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    extra = {} if busy_timeout_ms is None else {"MEMORY_BUSY_TIMEOUT_MS": str(busy_timeout_ms)}
    env = server_env(db, **extra)
    params = StdioServerParameters(command=server_command()[0], args=server_command()[1:], env=env)
    lanes = [Lane(f"P{p}:", seed=1000 + p, target_size=80) for p in range(processes)]
    shared_acked: dict[str, list[str]] = {f"shared{j}": [] for j in range(SHARED)}
    race_created: dict[str, int] = {}
    errors: list[str] = []
    stats = {"calls": 0}

    async def check(result: Any, what: str) -> Any:
        stats["calls"] += 1
        if result.is_error:
            text = result.content[0].text
            errors.append(f"{what}: {text}")
            raise AssertionError(f"{what} failed{' (LOCKED SURFACED)' if _locked(text) else ''}: {text}")
        return result.structured_content

    async def drive(p: int) -> None:
        lane = lanes[p]
        rng = random.Random(p)
        races = list(range(RACES))
        rng.shuffle(races)
        errlog = open(tmp_path / f"proc{p}.stderr", "w")  # noqa: SIM115
        try:
            transport = stdio_client(params, errlog=errlog)
            async with Client(transport, mode="legacy" if p % 2 else "auto", cache=None) as client:
                done = 0

                async def worker(w: int) -> None:
                    nonlocal done
                    k = 0
                    while done < writes:
                        done += 1
                        k += 1
                        roll = rng.random()
                        if roll < 0.15:
                            name = f"shared{rng.randrange(SHARED)}"
                            content = f"{lane.prefix}{w}.{k} shared note"
                            r = await check(await client.call_tool("add_observations", {"observations": [
                                {"entityName": name, "contents": [content]}]}), "add to shared")
                            assert r["results"][0]["addedObservations"] == [content]
                            shared_acked[name].append(content)
                        elif roll < 0.22 and races:
                            race = f"race{races.pop()}"
                            r = await check(await client.call_tool("create_entities", {"entities": [
                                {"name": race, "entityType": lane.prefix, "observations": [lane.prefix]}]}),
                                "race create")
                            if r["entities"]:
                                race_created[race] = race_created.get(race, 0) + 1
                        else:
                            op = lane.next_op()
                            lane.ack(op, _as_dict(await client.call_tool(op.tool, op.args)))
                            stats["calls"] += 1

                async with anyio.create_task_group() as tg:
                    for w in range(workers):
                        tg.start_soon(worker, w)
        finally:
            errlog.close()

    # The shared entities exist before the storm (created by a first, short-lived process).
    async with Client(stdio_client(params, errlog=open(os.devnull, "w")), mode="legacy", cache=None) as c:
        await check(await c.call_tool("create_entities", {"entities": [
            {"name": name, "entityType": "shared", "observations": ["origin"]} for name in shared_acked]}), "seed")

    if hog is None:
        async with anyio.create_task_group() as tg:
            for p in range(processes):
                tg.start_soon(drive, p)
    else:
        with LockHog(db, hold=hog, pause=(0.02, 0.1)) as lock_hog:
            async with anyio.create_task_group() as tg:
                for p in range(processes):
                    tg.start_soon(drive, p)
        stats["hog_grabs"] = lock_hog.grabs
    assert not errors, errors[:5]

    async with Client(stdio_client(params, errlog=open(os.devnull, "w")), mode="legacy", cache=None) as c:
        graph = (await c.call_tool("read_graph", {})).structured_content
    for lane in lanes:
        lane.check(graph)
    by_name = {e["name"]: e for e in graph["entities"]}
    assert len(by_name) == len(graph["entities"])
    for name, contents in shared_acked.items():
        observations = by_name[name]["observations"]
        assert observations[0] == "origin"
        assert len(observations) == len(set(observations)), f"{name}: an observation stored twice"
        assert set(observations[1:]) == set(contents), f"{name}: lost {set(contents) - set(observations)}"
    for race, count in race_created.items():
        assert count == 1, f"{race} reported created {count} times"
        assert race in by_name
    assert all(by_name[r]["entityType"] in {lane.prefix for lane in lanes} for r in race_created)
    assert integrity_problems(db) == []
    return {**stats, "acked_per_lane": [lane.acked for lane in lanes],
            "shared_additions": sum(len(c) for c in shared_acked.values())}


async def test_two_server_processes_hundreds_of_writes_each(tmp_path: Path) -> None:
    stats = await _process_storm(tmp_path / "memory.db", tmp_path, processes=2, writes=300, workers=4)
    print("process storm", stats)
    assert stats["calls"] >= 600


async def test_three_processes_and_a_lock_hog_short_busy_timeout_no_locked_errors(tmp_path: Path) -> None:
    """A 50 ms busy timeout while another program holds the write lock for up to 150 ms at a time:
    SQLITE_BUSY does reach the store, which retries the whole transaction; callers see no error."""
    stats = await _process_storm(tmp_path / "memory.db", tmp_path, processes=3, writes=150, workers=3,
                                 busy_timeout_ms=50, hog=(0.06, 0.15))
    print("process storm", stats)
    assert stats["hog_grabs"] > 5


@SLOW
async def test_four_server_processes_thousands_of_writes(tmp_path: Path) -> None:
    stats = await _process_storm(tmp_path / "memory.db", tmp_path, processes=4, writes=1500, workers=4)
    print("process storm", stats)
    assert stats["calls"] >= 6000
