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

import os
import random
import threading
import time
from pathlib import Path
from typing import Any

from .conftest import SLOW, Lane, drive_until_gone, integrity_problems
from .crashes import Target, crash_lanes, crash_loop, sigkill


def test_sigkill_during_write_storms(spawn: Any, tmp_path: Path) -> None:
    lane = Lane("A:", seed=7)
    stats = crash_loop(spawn, Target(tmp_path / "memory.db"), lane, kills=10, max_delay=0.3, window=6, seed=11)
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
    results = crash_lanes(spawn, Target(db), lanes, kills_per_lane=kills_per_lane, max_delay=0.4, window=8, seed=100)
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
    timer = threading.Timer(0.3, sigkill, (victim,))
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
