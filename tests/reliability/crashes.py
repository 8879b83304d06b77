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
import json
import os
import random
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .conftest import (
    HANDSHAKE_VERSION,
    Lane,
    Op,
    RawServer,
    ServerGone,
    drive_until_gone,
    integrity_problems,
    server_command,
    server_env,
)

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


class HttpServer:
    """``graph-memory serve --transport http`` as a child process on a free port, driven with
    handshake-era JSON-RPC POSTs in one session, with :class:`RawServer`'s ``send``/``wait_any``/
    ``take``/``drain`` so :func:`drive_until_gone` drives it too. Each call is its own POST on a
    thread of a pool (``window`` at once); a POST that fails (the process died) leaves its call
    unanswered: in flight, its fate for :meth:`Lane.settle` to find out."""

    def __init__(self, env: dict[str, str], stderr_path: Path, *, window: int = 8) -> None:
        import httpx2

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        self.stderr_path = stderr_path
        with open(stderr_path, "ab") as stderr:
            self.proc = subprocess.Popen([*server_command(), "serve", "--transport", "http", "--port", str(port)],
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                                         env=env, start_new_session=True)
        self.url = f"http://127.0.0.1:{port}"
        self._http = httpx2.Client(timeout=60, limits=httpx2.Limits(max_connections=window + 2))
        self._transport_error = httpx2.TransportError
        self._pool = ThreadPoolExecutor(window)
        self._headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": HANDSHAKE_VERSION}
        self._cond = threading.Condition()
        self._next_id = 1
        self._outstanding = 0
        self.responses: dict[int, dict[str, Any]] = {}

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    @property
    def eof(self) -> bool:
        """The process is gone and every POST sent to it has ended."""
        with self._cond:
            return not self.alive() and self._outstanding == 0

    def stderr_text(self) -> str:
        return self.stderr_path.read_text("utf-8", "replace")

    def _post(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """POST one message; its JSON-RPC answer (from JSON or the SSE stream), None for a notification."""
        reply = self._http.post(f"{self.url}/mcp", json=message, headers=self._headers)
        reply.raise_for_status()
        if "mcp-session-id" in reply.headers:
            self._headers["Mcp-Session-Id"] = reply.headers["mcp-session-id"]
        if "id" not in message:
            return None
        if reply.headers.get("content-type", "").startswith("text/event-stream"):
            for line in reply.text.splitlines():
                if line.startswith("data:"):
                    answer = json.loads(line[5:])
                    if answer.get("id") == message["id"]:
                        return dict(answer)
            raise AssertionError(f"no answer in the SSE stream: {reply.text[:500]}")
        return dict(reply.json())

    def initialize(self, timeout: float = 60.0) -> None:
        """Wait for ``/readyz``, then open a handshake-era session."""
        deadline = time.monotonic() + timeout
        while True:
            assert self.alive(), f"HTTP server exited early: {self.stderr_text()[-2000:]}"
            with contextlib.suppress(self._transport_error):
                if self._http.get(f"{self.url}/readyz", timeout=1).status_code == 200:
                    break
            assert time.monotonic() < deadline, f"HTTP server not ready: {self.stderr_text()[-2000:]}"
            time.sleep(0.05)
        self._post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": HANDSHAKE_VERSION, "capabilities": {},
            "clientInfo": {"name": "reliability-tests", "version": "1"}}})
        self._post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, method: str, params: dict[str, Any]) -> int:
        """Start one request on the pool; returns its id. Raises ServerGone when the process is gone."""
        if not self.alive():
            raise ServerGone(f"HTTP server {self.pid} gone before {method}")
        with self._cond:
            request_id = self._next_id
            self._next_id += 1
            self._outstanding += 1
        self._pool.submit(self._exchange, {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return request_id

    def _exchange(self, message: dict[str, Any]) -> None:
        answer = None
        try:
            answer = self._post(message)
        except self._transport_error:
            pass  # the process died with the call: unanswered
        finally:
            with self._cond:
                if answer is not None:
                    self.responses[message["id"]] = answer
                self._outstanding -= 1
                self._cond.notify_all()

    def wait_any(self, ids: set[int], timeout: float) -> list[int]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                done = [i for i in ids if i in self.responses]
                if done or (not self.alive() and self._outstanding == 0):
                    return done
                left = deadline - time.monotonic()
                if left <= 0:
                    return []
                self._cond.wait(min(left, 0.05))  # the process may die without a POST ending

    def take(self, request_id: int) -> dict[str, Any]:
        with self._cond:
            return self.responses.pop(request_id)

    def drain(self) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._outstanding == 0, 10)

    def kill(self) -> None:
        """SIGKILL, then reap and close the client."""
        sigkill(self)
        self.proc.wait()
        self._pool.shutdown(wait=True)
        self._http.close()


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


def sigkill(server: RawServer | HttpServer) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(server.pid, signal.SIGKILL)


class Killer:
    """SIGKILLs ``server`` once ``lane`` has acknowledged ``acks`` more calls, ``delay`` seconds
    later (a random moment that still falls after some writes, however loaded the machine);
    :meth:`cancel` when the storm ended otherwise."""

    def __init__(self, server: RawServer | HttpServer, lane: Lane, *, acks: int, delay: float) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(server, lane, lane.acked + acks, delay), daemon=True)
        self._thread.start()

    def _run(self, server: RawServer | HttpServer, lane: Lane, target: int, delay: float) -> None:
        while lane.acked < target and not self._stop.is_set():
            time.sleep(0.002)
        if not self._stop.wait(delay):
            sigkill(server)

    def cancel(self) -> None:
        self._stop.set()
        self._thread.join()


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
               seed: int, startup_kill_rate: float = 0.1, max_acks: int = 0,
               stats: dict[str, Any] | None = None) -> dict[str, Any]:
    """Start, storm, SIGKILL at a random moment, restart and verify — ``kills`` times — then a
    final verified restart and a clean shutdown. The kill comes up to ``max_delay`` seconds into
    the storm, or with ``max_acks``, that long after 1 to ``max_acks`` acknowledged calls."""
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
        killer = Killer(server, lane, acks=rng.randint(1, max_acks) if max_acks else 0,
                        delay=rng.uniform(0.0, max_delay))
        try:
            pending = drive_until_gone(server, lane, window=window)
        finally:
            killer.cancel()
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
                window: int, seed: int, startup_kill_rate: float = 0.1, max_acks: int = 0) -> dict[str, dict[str, Any]]:
    """:func:`crash_loop` for every lane at once, each lane with its own server process on
    ``target``: each kills and restarts its own server over and over while the others keep
    writing. Returns each lane's stats by prefix; re-raises the first lane's failure."""
    results: dict[str, dict[str, Any]] = {lane.prefix: {} for lane in lanes}
    errors: list[BaseException] = []

    def run(lane: Lane, lane_seed: int) -> None:
        try:
            crash_loop(spawn, target, lane, kills=kills_per_lane, max_delay=max_delay, window=window,
                       seed=lane_seed, startup_kill_rate=startup_kill_rate, max_acks=max_acks,
                       stats=results[lane.prefix])
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
