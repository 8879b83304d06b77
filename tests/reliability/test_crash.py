"""Crash safety: SIGKILL the real ``graph-memory`` process at random moments of a write storm.

After every restart: ``PRAGMA integrity_check`` is ok, the FTS5 index agrees with its content
table (FTS5 ``integrity-check``), every write acknowledged before the kill is present, each call
that was in flight at the kill happened completely or not at all, and nothing is stored twice
(:meth:`Lane.settle` compares the whole graph with the model). The search index is also used
after every restart to find a stored fact.

Default run: about 10 kills on one database. Slow run (``-m slow``, in CI): 200+ kills, two
lanes on one shared database so a server is also killed while another keeps writing, and restarts
happen both with and without a surviving process holding the WAL.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import threading
import time
from pathlib import Path
from typing import Any

from .conftest import SLOW, Lane, Op, RawServer, drive_until_gone, integrity_problems


def _sigkill(server: RawServer) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(server.pid, signal.SIGKILL)


def _verify_restart(server: RawServer, lane: Lane, pending: list[Op], db: Path) -> int:
    """Checks after a restart; returns how many in-flight calls of the previous run had happened."""
    happened = lane.settle(pending, server.read_graph())
    problems = integrity_problems(db)
    assert problems == [], f"integrity after restart: {problems}"
    sample = lane.sample_observation()
    if sample is not None:
        name, observation = sample
        found = server.call_ok("search_nodes", {"query": observation})
        assert name in [e["name"] for e in found["entities"]], f"search lost {observation!r} of {name}"
    return happened


def crash_loop(spawn: Any, db: Path, lane: Lane, *, kills: int, max_delay: float, window: int,
               seed: int, startup_kill_rate: float = 0.1, stats: dict[str, Any] | None = None) -> dict[str, Any]:
    """Start, storm, SIGKILL at a random moment, restart and verify — ``kills`` times — then a
    final verified restart and a clean shutdown."""
    rng = random.Random(seed)
    stats = stats if stats is not None else {}
    stats.update(kills=0, startup_kills=0, acked=0, in_flight_at_kill=0, in_flight_applied=0)
    pending: list[Op] = []
    for _ in range(kills):
        server = spawn(db)
        if rng.random() < startup_kill_rate:
            # Kill during start: imports, opening the file, WAL recovery, migration check.
            time.sleep(rng.uniform(0.0, 1.0))
            server.kill()
            stats["startup_kills"] += 1
            stats["kills"] += 1
            continue
        server.initialize()
        stats["in_flight_applied"] += _verify_restart(server, lane, pending, db)
        before = lane.acked
        timer = threading.Timer(rng.uniform(0.0, max_delay), _sigkill, (server,))
        timer.start()
        try:
            pending = drive_until_gone(server, lane, window=window)
        finally:
            timer.cancel()
            server.kill()
        stats["kills"] += 1
        stats["acked"] += lane.acked - before
        stats["in_flight_at_kill"] += len(pending)
    server = spawn(db)
    server.initialize()
    stats["in_flight_applied"] += _verify_restart(server, lane, pending, db)
    assert server.close() == 0, server.stderr_text()[-2000:]
    return stats


def test_sigkill_during_write_storms(spawn: Any, tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    lane = Lane("A:", seed=7)
    stats = crash_loop(spawn, db, lane, kills=10, max_delay=0.3, window=6, seed=11)
    print("crash stats", stats)
    assert stats["kills"] == 10
    assert stats["acked"] > 50, stats  # the storms really wrote between the kills


@SLOW
def test_sigkill_many_times_two_writers_one_database(spawn: Any, tmp_path: Path) -> None:
    """≥200 kills: two lanes, each its own server process, on one database file; each lane kills
    and restarts its own server over and over while the other keeps writing."""
    db = tmp_path / "memory.db"
    kills_per_lane = int(os.environ.get("GM_CRASH_KILLS_PER_LANE", "100"))
    lanes = [Lane("A:", seed=1, target_size=120), Lane("B:", seed=2, target_size=120)]
    results: dict[str, dict[str, Any]] = {lane.prefix: {} for lane in lanes}
    errors: list[BaseException] = []

    def run(lane: Lane, seed: int) -> None:
        try:
            crash_loop(spawn, db, lane, kills=kills_per_lane, max_delay=0.4, window=8, seed=seed,
                       stats=results[lane.prefix])
        except BaseException as exc:  # re-raised in the test thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(lane, 100 + i)) for i, lane in enumerate(lanes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("crash stats", results)
    if errors:
        raise errors[0]
    assert sum(r["kills"] for r in results.values()) >= 200 or kills_per_lane < 100
    assert integrity_problems(db) == []


def _wait_for(path: Path, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return True
        time.sleep(0.001)
    return False


def _kill_during_first_start(spawn: Any, tmp_path: Path, attempts: int, seed: int) -> None:
    """Kill the server moments after it created a new database file (while it migrates), then
    start it again: the database must come up complete and sound every time."""
    rng = random.Random(seed)
    for attempt in range(attempts):
        db = tmp_path / f"fresh-{attempt}" / "memory.db"
        server = spawn(db)
        assert _wait_for(db, 60), "the server never created its database"
        time.sleep(rng.uniform(0.0, 0.03))
        server.kill()
        server = spawn(db)
        server.initialize()
        server.call_ok("create_entities", {"entities": [{"name": "x", "entityType": "t", "observations": ["o"]}]})
        assert server.call_ok("search_nodes", {"query": "x"})["entities"][0]["name"] == "x"
        assert server.close() == 0
        assert integrity_problems(db) == []
        from graph_memory.db import migrations
        from graph_memory.db.store import Store

        store = Store.open(db, migrate=False)
        try:
            assert not migrations.status(store.conn, str(db)).pending
        finally:
            store.close()


def test_sigkill_during_first_start(spawn: Any, tmp_path: Path) -> None:
    _kill_during_first_start(spawn, tmp_path, attempts=2, seed=3)


@SLOW
def test_sigkill_during_first_start_many(spawn: Any, tmp_path: Path) -> None:
    _kill_during_first_start(spawn, tmp_path, attempts=10, seed=4)


def test_sigkill_then_second_process_recovers_without_restart(spawn: Any, tmp_path: Path) -> None:
    """One server is killed mid-storm while another process stays up on the same file: the
    survivor keeps writing, sees every acknowledged write of the dead one, and the file stays sound."""
    db = tmp_path / "memory.db"
    survivor, victim = spawn(db), spawn(db)
    survivor.initialize()
    victim.initialize()
    lane_v, lane_s = Lane("V:", seed=5), Lane("S:", seed=6)
    timer = threading.Timer(0.3, _sigkill, (victim,))
    timer.start()
    try:
        pending = drive_until_gone(victim, lane_v, window=8)
    finally:
        timer.cancel()
        victim.kill()
    assert drive_until_gone(survivor, lane_s, window=4, max_ops=100) == []
    lane_v.settle(pending, survivor.read_graph())
    lane_s.check(survivor.read_graph())
    assert integrity_problems(db) == []
    assert survivor.close() == 0
