"""The crash loop of the crash tests, on either backend: start the real ``graph-memory``, drive a
:class:`~.conftest.Lane` into it, SIGKILL it at a random moment, restart it and check everything
(:func:`verify_restart`), over and over; several lanes at once, each with its own process on one
database (:func:`crash_lanes`).

A :class:`Target` is the database the processes share: a SQLite file, or a PostgreSQL database
(``MEMORY_DATABASE_URL``). Its :meth:`Target.integrity_problems` is ``PRAGMA integrity_check`` plus
FTS5's own check on SQLite, and :func:`postgres_integrity_problems` on PostgreSQL.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .conftest import Lane, Op, RawServer, drive_until_gone, integrity_problems, server_env

Spawn = Callable[..., RawServer]


@dataclass(frozen=True)
class Target:
    """The database the servers of a test share: the SQLite file ``path``, or the PostgreSQL
    database ``url`` (then ``path`` is ``MEMORY_FILE_PATH``, the legacy file a first start imports)."""

    path: Path
    url: str | None = None

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of a server process on this database."""
        if self.url is not None:
            extra = {"MEMORY_DATABASE_URL": self.url, **extra}
        return server_env(self.path, **extra)

    def start(self, spawn: Spawn) -> RawServer:
        return spawn(self.path, env=self.env())

    def integrity_problems(self) -> list[str]:
        return integrity_problems(self.path) if self.url is None else postgres_integrity_problems(self.url)


def postgres_integrity_problems(url: str) -> list[str]:
    """What is inconsistent in the graph-memory database ``url``, recomputed here in Python from
    the rows (empty: nothing):

    * every entity has exactly one search document (``entity_search``), and each document is its
      name, type and observations (in id order) lower-cased with ``str.lower()`` and encoded, as
      :mod:`graph_memory.db.postgres.text` defines them (none stale, none of a deleted entity);
    * every uniqueness key (``name_key``, ``content_key``, ``relation_key``, ``from_key``,
      ``to_key``) is the sha256 of its text, so no two rows hold the same name, observation of an
      entity or triple (the UNIQUE constraints are on the keys);
    * the migration history is the one this version ships, complete.
    """
    import psycopg

    from graph_memory.db.postgres.backend import known_migrations
    from graph_memory.db.postgres.text import decode, document, encode, key, relation_key

    problems: list[str] = []
    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        heads = {int(i): (decode(n), bytes(k), decode(t))
                 for i, n, k, t in conn.execute("SELECT id, name, name_key, entity_type FROM entities")}
        observations: dict[int, list[str]] = {i: [] for i in heads}
        for entity_id, content, content_key in conn.execute(
                "SELECT entity_id, content, content_key FROM observations ORDER BY id"):
            text = decode(content)
            observations[entity_id].append(text)
            if bytes(content_key) != key(text):
                problems.append(f"observation {text!r} of entity {entity_id}: content_key is not its sha256")
        documents = {int(i): (n, t, o) for i, n, t, o in
                     conn.execute("SELECT entity_id, name, entity_type, observations FROM entity_search")}
        for entity_id, (name, name_key, entity_type) in heads.items():
            if name_key != key(name):
                problems.append(f"entity {name!r}: name_key is not the sha256 of its name")
            want = (encode(name.lower()), encode(entity_type.lower()), document(observations[entity_id]))
            got = documents.get(entity_id)
            if got != want:
                problems.append(f"entity {name!r}: search document {got!r}, from its rows {want!r}")
        problems += [f"search document {i} of no entity" for i in sorted(set(documents) - set(heads))]
        for source, target, relation_type, from_key, to_key, triple_key in conn.execute(
                "SELECT from_name, to_name, relation_type, from_key, to_key, relation_key FROM relations"):
            s, t, r = decode(source), decode(target), decode(relation_type)
            if (bytes(from_key), bytes(to_key), bytes(triple_key)) != (key(s), key(t), relation_key(s, t, r)):
                problems.append(f"relation {(s, t, r)!r}: keys are not the sha256 of its text")
        ledger = [(int(i), str(n)) for i, n in conn.execute("SELECT id, name FROM schema_migrations ORDER BY id")]
        if ledger != [(m.id, m.name) for m in known_migrations()]:
            problems.append(f"migration history {ledger}")
    return problems


def sigkill(server: RawServer) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(server.pid, signal.SIGKILL)


def check_search(server: RawServer, lane: Lane) -> None:
    """A stored fact of the lane is found by search_nodes in ``substring`` mode (the whole
    observation) and in ``words`` mode (its words, in reverse order)."""
    sample = lane.sample_observation()
    if sample is None:
        return
    name, observation = sample
    for mode, query in (("substring", observation), ("words", " ".join(reversed(observation.split())))):
        found = server.call_ok("search_nodes", {"query": query, "mode": mode})
        assert name in [e["name"] for e in found["entities"]], f"{mode} search lost {observation!r} of {name}"


def verify_restart(server: RawServer, lane: Lane, pending: list[Op], target: Target) -> int:
    """Checks after a restart; returns how many in-flight calls of the previous run had happened."""
    happened = lane.settle(pending, server.read_graph())
    problems = target.integrity_problems()
    assert problems == [], f"integrity after restart: {problems}"
    check_search(server, lane)
    return happened


def crash_loop(spawn: Spawn, target: Target, lane: Lane, *, kills: int, max_delay: float, window: int,
               seed: int, startup_kill_rate: float = 0.1, stats: dict[str, Any] | None = None) -> dict[str, Any]:
    """Start, storm, SIGKILL at a random moment, restart and verify — ``kills`` times — then a
    final verified restart and a clean shutdown."""
    rng = random.Random(seed)
    stats = stats if stats is not None else {}
    stats.update(kills=0, startup_kills=0, acked=0, in_flight_at_kill=0, in_flight_applied=0)
    pending: list[Op] = []
    for _ in range(kills):
        server = target.start(spawn)
        if rng.random() < startup_kill_rate:
            # Kill during start: imports, opening the database, WAL recovery, migration check.
            time.sleep(rng.uniform(0.0, 1.0))
            server.kill()
            stats["startup_kills"] += 1
            stats["kills"] += 1
            continue
        server.initialize()
        stats["in_flight_applied"] += verify_restart(server, lane, pending, target)
        before = lane.acked
        timer = threading.Timer(rng.uniform(0.0, max_delay), sigkill, (server,))
        timer.start()
        try:
            pending = drive_until_gone(server, lane, window=window)
        finally:
            timer.cancel()
            server.kill()
        stats["kills"] += 1
        stats["acked"] += lane.acked - before
        stats["in_flight_at_kill"] += len(pending)
    server = target.start(spawn)
    server.initialize()
    stats["in_flight_applied"] += verify_restart(server, lane, pending, target)
    assert server.close() == 0, server.stderr_text()[-2000:]
    return stats


def crash_lanes(spawn: Spawn, target: Target, lanes: Sequence[Lane], *, kills_per_lane: int, max_delay: float,
                window: int, seed: int, startup_kill_rate: float = 0.1) -> dict[str, dict[str, Any]]:
    """:func:`crash_loop` for every lane at once, each lane with its own server process on
    ``target``: each kills and restarts its own server over and over while the others keep
    writing. Returns each lane's stats by prefix; re-raises the first lane's failure."""
    results: dict[str, dict[str, Any]] = {lane.prefix: {} for lane in lanes}
    errors: list[BaseException] = []

    def run(lane: Lane, lane_seed: int) -> None:
        try:
            crash_loop(spawn, target, lane, kills=kills_per_lane, max_delay=max_delay, window=window,
                       seed=lane_seed, startup_kill_rate=startup_kill_rate, stats=results[lane.prefix])
        except BaseException as exc:  # re-raised in the test thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(lane, seed + i)) for i, lane in enumerate(lanes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("crash stats", results)
    if errors:
        raise errors[0]
    return results
