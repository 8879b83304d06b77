"""Helpers for the reliability tests: the real ``graph-memory`` process over stdio, a model of
the graph that knows what every acknowledged write must have left behind, and a generator of
mixed write storms whose effects can be checked exactly, even after a crash.

Nothing here shares state between tests: every database lives under the test's ``tmp_path`` and
every process a test starts is killed when the test ends.

The write storms (:class:`Lane`)
    A lane owns a name prefix and a :class:`GraphModel` of the entities and relations under it.
    It generates tool calls (create/delete entities, add/delete/update observations, create/delete
    relations) that each have at least one visible effect and never touch an entity another
    in-flight call of the lane touches, so in-flight calls commute. Lanes may also share *hub*
    entities (made before the storm, never deleted): a lane adds, edits and removes observations
    of its own (starting with its prefix) on them, alone or together with its own entities in one
    call, so lanes on several processes write the same rows at once and each call's all-or-nothing
    effect is still exact in the lane's view (its entities plus its observations on the hubs).
    When a call is acknowledged its
    effect is applied to the model (and its result compared with the prediction). After a crash the
    calls that were in flight are each either applied completely or not at all: :meth:`Lane.settle`
    probes each one's marker in the real graph, applies the ones that happened, and then demands that
    the real graph equal the model exactly.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pytest

EXE = Path(sys.executable).with_name("graph-memory")
HANDSHAKE_VERSION = "2025-11-25"
SLOW = pytest.mark.slow


def server_command() -> list[str]:
    """The console script of this environment (``python -m graph_memory`` when not installed)."""
    return [str(EXE)] if EXE.exists() else [sys.executable, "-m", "graph_memory"]


def server_env(db: Path | str, **extra: str) -> dict[str, str]:
    """The environment of a server process: ours without MEMORY_*, plus the database and quiet logs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env.update(MEMORY_FILE_PATH=str(db), MEMORY_LOG_LEVEL="warning", MEMORY_LOG_FORMAT="json")
    env.update(extra)
    return env


# -- a raw JSON-RPC client over the real process's stdio ------------------------------------------


class ServerGone(Exception):
    """The server process exited (or was killed) before answering."""


class RawServer:
    """``graph-memory`` as a child process, driven with newline-delimited JSON-RPC over its pipes.

    Deliberately thin (no SDK): requests can be pipelined, the process can be SIGKILLed at any
    moment, and every acknowledgement is seen exactly as the bytes arrived. A reader thread files
    each response under its id.
    """

    def __init__(self, db: Path, stderr_path: Path, *, env: dict[str, str] | None = None,
                 args: tuple[str, ...] = ()) -> None:
        self.db = db
        self.stderr_path = stderr_path
        self._stderr = open(stderr_path, "ab")  # noqa: SIM115 - closed in _reap
        self.proc = subprocess.Popen(
            [*server_command(), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
            env=env or server_env(db), start_new_session=True,
        )
        self._next_id = 1
        self._send_lock = threading.Lock()
        self._cond = threading.Condition()
        self.responses: dict[int, dict[str, Any]] = {}
        self.eof = False
        self._reader = threading.Thread(target=self._read, name=f"reader-{self.proc.pid}", daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self) -> None:
        assert self.proc.stdout is not None
        try:
            for raw in self.proc.stdout:
                message = json.loads(raw)  # anything on stdout that is not JSON fails loudly
                if "id" in message and ("result" in message or "error" in message):
                    with self._cond:
                        self.responses[message["id"]] = message
                        self._cond.notify_all()
        finally:
            with self._cond:
                self.eof = True
                self._cond.notify_all()

    def send(self, method: str, params: dict[str, Any] | None = None, *, notify: bool = False) -> int:
        """Write one request (or notification); returns its id. Raises ServerGone on a dead pipe."""
        assert self.proc.stdin is not None
        with self._send_lock:
            message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
            if params is not None:
                message["params"] = params
            request_id = 0
            if not notify:
                request_id = message["id"] = self._next_id
                self._next_id += 1
            try:
                self.proc.stdin.write(json.dumps(message, ensure_ascii=False).encode("utf-8", "surrogatepass")
                                      + b"\n")
                self.proc.stdin.flush()
            except (BrokenPipeError, ValueError, OSError) as exc:
                raise ServerGone(f"server {self.pid} gone while sending {method}") from exc
        return request_id

    def send_raw(self, line: bytes) -> None:
        """Write raw bytes followed by a newline (hostile-input tests)."""
        assert self.proc.stdin is not None
        with self._send_lock:
            self.proc.stdin.write(line + b"\n")
            self.proc.stdin.flush()

    def wait(self, request_id: int, timeout: float = 60.0) -> dict[str, Any]:
        """The response to ``request_id``. Raises ServerGone when the process ended without it."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while request_id not in self.responses:
                if self.eof:
                    raise ServerGone(f"server {self.pid} exited before answering request {request_id}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no answer to request {request_id} within {timeout}s; "
                                       f"stderr: {self.stderr_text()[-2000:]}")
                self._cond.wait(left)
            return self.responses.pop(request_id)

    def wait_any(self, ids: set[int], timeout: float) -> list[int]:
        """Ids among ``ids`` answered so far, waiting up to ``timeout`` for at least one."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                done = [i for i in ids if i in self.responses]
                if done or self.eof:
                    return done
                left = deadline - time.monotonic()
                if left <= 0:
                    return []
                self._cond.wait(left)

    def take(self, request_id: int) -> dict[str, Any]:
        with self._cond:
            return self.responses.pop(request_id)

    def drain(self) -> None:
        """After the process ended: wait until every answer it wrote has been read."""
        self._reader.join(10)

    def initialize(self, timeout: float = 60.0) -> dict[str, Any]:
        """The handshake-era ``initialize`` exchange; returns the server's result."""
        rid = self.send("initialize", {"protocolVersion": HANDSHAKE_VERSION, "capabilities": {},
                                       "clientInfo": {"name": "reliability-tests", "version": "1"}})
        answer = self.wait(rid, timeout)
        assert "result" in answer, answer
        self.send("notifications/initialized", notify=True)
        return answer["result"]

    def call(self, tool: str, arguments: Any, timeout: float = 60.0) -> dict[str, Any]:
        """``tools/call``; returns the CallToolResult as a dict (``isError`` may be true)."""
        answer = self.wait(self.send("tools/call", {"name": tool, "arguments": arguments}), timeout)
        assert "result" in answer, f"JSON-RPC error for {tool}: {answer}"
        return answer["result"]

    def call_ok(self, tool: str, arguments: Any, timeout: float = 60.0) -> dict[str, Any]:
        """``tools/call`` that must succeed; returns structuredContent."""
        result = self.call(tool, arguments, timeout)
        assert not result.get("isError"), f"{tool} failed: {result['content'][0]['text']}"
        return result["structuredContent"]

    def read_graph(self) -> dict[str, Any]:
        return self.call_ok("read_graph", {})

    def kill(self) -> None:
        """SIGKILL, then reap."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGKILL)
        self._reap()

    def close(self, timeout: float = 20.0) -> int:
        """Close stdin (the polite shutdown) and wait; kill if it lingers. Returns the exit code."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self._reap()
        return self.proc.returncode

    def _reap(self) -> None:
        self.proc.wait()
        self._reader.join(10)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self._stderr.close()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stderr_text(self) -> str:
        try:
            return self.stderr_path.read_text("utf-8", "replace")
        except OSError:
            return ""


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Any]:
    """``spawn(db, env=None, args=()) -> RawServer``; every process is killed at teardown."""
    started: list[RawServer] = []

    def start(db: Path, *, env: dict[str, str] | None = None, args: tuple[str, ...] = ()) -> RawServer:
        server = RawServer(db, tmp_path / f"server-{len(started)}.stderr", env=env, args=args)
        started.append(server)
        return server

    yield start
    for server in started:
        if server.alive():
            server.kill()


def run_cli(*args: str, env: dict[str, str], timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run ``graph-memory ARGS`` to completion with stdin closed."""
    return subprocess.run([*server_command(), *args], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          env=env, timeout=timeout, check=False)


def start_failure(db: Path, *, env: dict[str, str] | None = None, timeout: float = 60.0
                  ) -> subprocess.CompletedProcess[str]:
    """Start the stdio server where it must refuse to start; returns the finished process.

    stdin is a pipe sending ``initialize``, ``notifications/initialized`` and a ``read_graph``
    call (ids 1 and 2), then closed: a refusing server answers both with why and exits 1 (see
    ``_answer_with_refusal`` in graph_memory.cli); one that does start answers read_graph with a
    graph and exits 0 (the test fails on the exit code)."""
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": HANDSHAKE_VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "read_graph", "arguments": {}}},
    ]
    proc = subprocess.Popen(server_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env or server_env(db))
    try:
        out, err = proc.communicate("".join(json.dumps(line) + "\n" for line in lines), timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


# -- checking a database file ---------------------------------------------------------------------


def integrity_problems(db: Path) -> list[str]:
    """``PRAGMA integrity_check`` + FTS5 ``integrity-check`` through graph-memory's own Store
    (opened without migrating, so the check changes nothing but the search index's own check)."""
    from graph_memory.db.store import Store

    store = Store.open(db, busy_timeout_ms=30_000, migrate=False)
    try:
        return store.integrity_problems()
    finally:
        store.close()


def graph_state(payload: dict[str, Any], prefix: str = "") -> tuple[dict[str, tuple[str, list[str]]],
                                                                   list[tuple[str, str, str]]]:
    """``({name: (type, observations)}, sorted relation triples)`` of a read_graph payload,
    restricted to names starting with ``prefix``. Fails on a duplicate entity, observation or
    relation (nothing may ever be stored twice)."""
    entities: dict[str, tuple[str, list[str]]] = {}
    for e in payload["entities"]:
        if not e["name"].startswith(prefix):
            continue
        assert e["name"] not in entities, f"entity {e['name']!r} appears twice"
        assert len(set(e["observations"])) == len(e["observations"]), f"duplicate observation in {e}"
        entities[e["name"]] = (e["entityType"], list(e["observations"]))
    triples = [(r["from"], r["to"], r["relationType"]) for r in payload["relations"]
               if r["from"].startswith(prefix) or r["to"].startswith(prefix)]
    assert len(set(triples)) == len(triples), "a relation appears twice"
    return entities, sorted(triples)


# -- the graph model and the write-storm generator ------------------------------------------------


@dataclass
class GraphModel:
    """What the graph under one prefix must hold: ``{name: [type, [observations]]}`` and triples."""

    entities: dict[str, tuple[str, list[str]]] = field(default_factory=dict)
    relations: set[tuple[str, str, str]] = field(default_factory=set)

    def state(self) -> tuple[dict[str, tuple[str, list[str]]], list[tuple[str, str, str]]]:
        return {n: (t, list(o)) for n, (t, o) in self.entities.items()}, sorted(self.relations)


@dataclass
class Op:
    """One tool call of a storm: arguments, the entities it touches, its predicted result, and
    how to apply it to the model / recognise it in a real graph."""

    kind: str
    tool: str
    args: dict[str, Any]
    touches: set[str]
    expected: Any                 # predicted essence of structuredContent (see Lane._essence)
    data: dict[str, Any]          # what apply/probe need
    request_id: int = 0


class Lane:
    """A storm generator + model for the names under ``prefix`` (see the module docstring)."""

    WEIGHTS: ClassVar[dict[str, int]] = {"create": 26, "add": 20, "relate": 14, "delobs": 10, "update": 10,
                                         "delete": 12, "unrelate": 8, "share": 10}

    def __init__(self, prefix: str, seed: int, *, target_size: int = 150, hubs: Sequence[str] = ()) -> None:
        self.prefix = prefix
        self.rng = random.Random(seed)
        self.model = GraphModel()
        self.hubs = tuple(hubs)  # shared entities of type "hub", made by the test before the storm
        for hub in self.hubs:
            self.model.entities[hub] = ("hub", [])
        self.busy: dict[str, int] = {}
        self.counter = 0
        self.target_size = target_size
        self.acked = 0

    # generation ------------------------------------------------------------------------------

    def _stable(self, *, hubs: bool = False) -> list[str]:
        """Entities no in-flight call touches; hubs only for the calls that may touch them
        (observations), never for creating, relating or deleting."""
        return [n for n in self.model.entities if n not in self.busy and (hubs or n not in self.hubs)]

    def next_op(self) -> Op:
        """A new call whose touched entities are not touched by any in-flight call of this lane."""
        weights = dict(self.WEIGHTS)
        if not self.hubs:
            del weights["share"]
        size = len(self.model.entities)
        if size > self.target_size:
            weights["delete"] += (size - self.target_size) // 2
        kinds = list(weights)
        while True:
            kind = self.rng.choices(kinds, [weights[k] for k in kinds])[0]
            op = getattr(self, f"_gen_{kind}")()
            if op is not None:
                for name in op.touches:
                    self.busy[name] = self.busy.get(name, 0) + 1
                return op

    def _k(self) -> str:
        self.counter += 1
        return f"{self.prefix}{self.counter}"

    def _gen_create(self) -> Op:
        k, rng = self._k(), self.rng
        items, created, names = [], [], []
        for i in range(rng.randint(1, 3)):
            name = f"{k}e{i}"
            obs = [f"{k} fact {i}.{j} ünïcode ✓" for j in range(rng.randint(0, 3))]
            if obs and rng.random() < 0.3:
                obs.append(obs[0])  # a repeat within the call is stored once
            items.append({"name": name, "entityType": f"type{rng.randint(0, 4)}", "observations": obs})
            created.append((name, items[-1]["entityType"], list(dict.fromkeys(obs))))
            names.append(name)
        touches = set(names)
        if rng.random() < 0.3:  # the first occurrence of a name wins within a call
            items.append({"name": names[0], "entityType": "other", "observations": ["ignored"]})
        stable = self._stable()
        if stable and rng.random() < 0.3:  # an existing name is skipped
            existing = rng.choice(stable)
            items.insert(rng.randint(0, len(items)), {"name": existing, "entityType": "x", "observations": ["no"]})
            touches.add(existing)
        expected = [[n, t, o] for n, t, o in created]
        return Op("create", "create_entities", {"entities": items}, touches, expected, {"created": created})

    def _gen_add(self, targets: list[str] | None = None) -> Op | None:
        stable = self._stable(hubs=True)
        if not stable:
            return None
        k, rng = self._k(), self.rng
        targets = targets or rng.sample(stable, min(len(stable), rng.randint(1, 2)))
        items, added = [], []
        for i, name in enumerate(targets):
            new = [f"{k} added {i}.{j}" for j in range(rng.randint(1, 3))]
            contents = list(new)
            existing = self.model.entities[name][1]
            if existing and rng.random() < 0.4:
                contents.insert(rng.randint(0, len(contents)), rng.choice(existing))
            items.append({"entityName": name, "contents": contents})
            added.append((name, new))
        return Op("add", "add_observations", {"observations": items}, set(targets),
                  [[n, a] for n, a in added], {"added": added})

    def _gen_share(self) -> Op | None:
        """add_observations on one or two hubs, sometimes with one of the lane's own entities."""
        free = [h for h in self.hubs if h not in self.busy]
        if not free:
            return None
        targets = self.rng.sample(free, min(len(free), self.rng.randint(1, 2)))
        own = self._stable()
        if own and self.rng.random() < 0.5:
            targets.insert(self.rng.randint(0, len(targets)), self.rng.choice(own))
        return self._gen_add(targets)

    def _gen_relate(self) -> Op | None:
        stable = self._stable()
        if not stable:
            return None
        k, rng = self._k(), self.rng
        new = [(rng.choice(stable), rng.choice(stable), f"{k}rel{i}") for i in range(rng.randint(1, 2))]
        rels = [{"from": a, "to": b, "relationType": t} for a, b, t in new]
        candidates = [r for r in self.model.relations if r[0] not in self.busy and r[1] not in self.busy]
        if candidates and rng.random() < 0.3:  # an existing triple is skipped
            a, b, t = rng.choice(sorted(candidates))
            rels.insert(rng.randint(0, len(rels)), {"from": a, "to": b, "relationType": t})
            new_touch = {a, b}
        else:
            new_touch = set()
        if rng.random() < 0.2:
            rels.append(dict(rels[0]))  # an in-call repeat is skipped
        touches = {n for a, b, _ in new for n in (a, b)} | new_touch
        return Op("relate", "create_relations", {"relations": rels}, touches, sorted(new), {"new": new})

    def _gen_delobs(self) -> Op | None:
        stable = [n for n in self._stable(hubs=True) if self.model.entities[n][1]]
        if not stable:
            return None
        k, rng = self._k(), self.rng
        name = rng.choice(stable)
        obs = self.model.entities[name][1]
        gone = rng.sample(obs, min(len(obs), rng.randint(1, 2)))
        request = [*gone, f"{k} never stored"]
        rng.shuffle(request)
        deletions = [{"entityName": name, "observations": request}]
        ghost = f"{k}ghost"
        if rng.random() < 0.3:  # an unknown entity is reported, not an error
            deletions.append({"entityName": ghost, "observations": ["x"]})
        expected = [[name, sorted(gone)]] + ([[ghost, []]] if len(deletions) > 1 else [])
        return Op("delobs", "delete_observations", {"deletions": deletions}, {name}, expected,
                  {"name": name, "gone": gone})

    def _gen_update(self) -> Op | None:
        stable = [n for n in self._stable(hubs=True) if self.model.entities[n][1]]
        if not stable:
            return None
        k, rng = self._k(), self.rng
        name = rng.choice(stable)
        match = rng.choice(self.model.entities[name][1])
        replacement = f"{k} replaced"
        return Op("update", "update_observations",
                  {"updates": [{"entityName": name, "match": match, "replacement": replacement}]}, {name},
                  [[name, [[match, replacement]]]], {"name": name, "match": match, "replacement": replacement})

    def _gen_delete(self) -> Op | None:
        stable = self._stable()
        if not stable:
            return None
        k, rng = self._k(), self.rng
        victims = rng.sample(stable, min(len(stable), rng.randint(1, 3)))
        # Deleting an entity removes every relation naming it: none of those may be in flight.
        if any(n in self.busy for r in self.model.relations if r[0] in victims or r[1] in victims for n in r[:2]):
            return None
        names = [*victims, f"{k}ghost"]
        rng.shuffle(names)
        touches = set(victims) | {n for r in self.model.relations if r[0] in victims or r[1] in victims
                                  for n in r[:2]}
        return Op("delete", "delete_entities", {"entityNames": names}, touches, sorted(victims),
                  {"victims": victims})

    def _gen_unrelate(self) -> Op | None:
        candidates = sorted(r for r in self.model.relations if r[0] not in self.busy and r[1] not in self.busy)
        if not candidates:
            return None
        k, rng = self._k(), self.rng
        gone = rng.sample(candidates, min(len(candidates), rng.randint(1, 2)))
        rels = [{"from": a, "to": b, "relationType": t} for a, b, t in gone]
        rels.append({"from": gone[0][0], "to": gone[0][1], "relationType": f"{k}never"})
        return Op("unrelate", "delete_relations", {"relations": rels}, {n for r in gone for n in r[:2]},
                  sorted(gone), {"gone": gone})

    # results -----------------------------------------------------------------------------------

    @staticmethod
    def _essence(op: Op, structured: dict[str, Any]) -> Any:
        """The part of a result the prediction covers, in the prediction's shape."""
        if op.kind == "create":
            return [[e["name"], e["entityType"], e["observations"]] for e in structured["entities"]]
        if op.kind == "add":
            return [[r["entityName"], r["addedObservations"]] for r in structured["results"]]
        if op.kind == "relate":
            return sorted((r["from"], r["to"], r["relationType"]) for r in structured["relations"])
        if op.kind == "delobs":
            return [[r["entityName"], sorted(r["deletedObservations"])] for r in structured["results"]]
        if op.kind == "update":
            return [[r["entityName"], [[u["match"], u["replacement"]] for u in r["updatedObservations"]]]
                    for r in structured["results"]]
        if op.kind == "delete":
            return sorted(structured["deletedEntities"])
        if op.kind == "unrelate":
            return sorted((r["from"], r["to"], r["relationType"]) for r in structured["deletedRelations"])
        raise AssertionError(op.kind)

    def release(self, op: Op) -> None:
        for name in op.touches:
            self.busy[name] -= 1
            if not self.busy[name]:
                del self.busy[name]

    def ack(self, op: Op, result: dict[str, Any]) -> None:
        """An acknowledged call: it must have succeeded exactly as predicted; apply it."""
        assert not result.get("isError"), f"{op.tool} failed: {result['content'][0]['text']}"
        got = self._essence(op, result["structuredContent"])
        assert got == op.expected, f"{op.tool} {op.args}: result {got} != predicted {op.expected}"
        self.apply(op)
        self.release(op)
        self.acked += 1

    def apply(self, op: Op) -> None:
        m, d = self.model, op.data
        if op.kind == "create":
            for name, etype, obs in d["created"]:
                assert name not in m.entities
                m.entities[name] = (etype, list(obs))
        elif op.kind == "add":
            for name, new in d["added"]:
                m.entities[name][1].extend(new)
        elif op.kind == "relate":
            m.relations.update(d["new"])
        elif op.kind == "delobs":
            obs = m.entities[d["name"]][1]
            obs[:] = [o for o in obs if o not in d["gone"]]
        elif op.kind == "update":
            obs = m.entities[d["name"]][1]
            obs[obs.index(d["match"])] = d["replacement"]
        elif op.kind == "delete":
            for name in d["victims"]:
                del m.entities[name]
            m.relations = {r for r in m.relations if r[0] not in d["victims"] and r[1] not in d["victims"]}
        elif op.kind == "unrelate":
            m.relations.difference_update(d["gone"])

    @staticmethod
    def applied(op: Op, entities: dict[str, tuple[str, list[str]]], relations: set[tuple[str, str, str]]) -> bool:
        """Whether an unacknowledged call's marker is visible in a real graph."""
        d = op.data
        if op.kind == "create":
            return d["created"][0][0] in entities
        if op.kind == "add":
            name, new = d["added"][0]
            return new[0] in entities[name][1]
        if op.kind == "relate":
            return d["new"][0] in relations
        if op.kind == "delobs":
            return d["gone"][0] not in entities[d["name"]][1]
        if op.kind == "update":
            return d["replacement"] in entities[d["name"]][1]
        if op.kind == "delete":
            return d["victims"][0] not in entities
        if op.kind == "unrelate":
            return d["gone"][0] not in relations
        raise AssertionError(op.kind)

    def view(self, payload: dict[str, Any]) -> tuple[dict[str, tuple[str, list[str]]], list[tuple[str, str, str]]]:
        """:func:`graph_state` of this lane in a read_graph payload: its entities and relations,
        and the hubs with only the lane's own observations."""
        entities, triples = graph_state(payload, self.prefix)
        for e in payload["entities"]:
            if e["name"] in self.hubs:
                entities[e["name"]] = (e["entityType"], [o for o in e["observations"] if o.startswith(self.prefix)])
        return entities, triples

    def settle(self, pending: list[Op], payload: dict[str, Any]) -> int:
        """After a crash: decide for each in-flight call whether it happened (all of it or none),
        apply those, and require the real graph under this prefix to equal the model exactly.
        Returns how many in-flight calls had been applied."""
        entities, triples = self.view(payload)
        happened = 0
        for op in pending:
            if self.applied(op, entities, set(triples)):
                self.apply(op)
                happened += 1
            self.release(op)
        assert not self.busy, self.busy
        self.check(payload)
        return happened

    def check(self, payload: dict[str, Any]) -> None:
        """The real graph under this prefix equals the model: nothing lost, nothing extra, nothing twice."""
        entities, triples = self.view(payload)
        want_entities, want_triples = self.model.state()
        if entities != want_entities:
            missing = sorted(set(want_entities) - set(entities))[:10]
            extra = sorted(set(entities) - set(want_entities))[:10]
            differ = [(n, want_entities[n], entities[n]) for n in want_entities
                      if n in entities and entities[n] != want_entities[n]][:5]
            raise AssertionError(f"lane {self.prefix}: entities differ; missing {missing}, extra {extra}, "
                                 f"different {differ}")
        if triples != want_triples:
            raise AssertionError(f"lane {self.prefix}: relations differ; missing "
                                 f"{sorted(set(want_triples) - set(triples))[:10]}, extra "
                                 f"{sorted(set(triples) - set(want_triples))[:10]}")

    def sample_observation(self) -> tuple[str, str] | None:
        """Some (entity, observation) of the model, for a search spot check."""
        with_obs = [(n, o) for n, (_, obs) in self.model.entities.items() for o in obs]
        return self.rng.choice(with_obs) if with_obs else None


def drive_until_gone(server: RawServer, lane: Lane, *, window: int, max_ops: int | None = None,
                     timeout: float = 60.0) -> list[Op]:
    """Pipeline the lane's calls into ``server`` (at most ``window`` in flight) until the process
    dies (or ``max_ops`` were acknowledged). Returns the calls still in flight at the end."""
    in_flight: dict[int, Op] = {}
    sent = 0
    while True:
        gone = not server.alive() or server.eof
        while not gone and len(in_flight) < window and (max_ops is None or sent < max_ops):
            op = lane.next_op()
            try:
                op.request_id = server.send("tools/call", {"name": op.tool, "arguments": op.args})
            except ServerGone:
                in_flight[-len(in_flight) - 1] = op  # may or may not have reached the server
                gone = True
                break
            in_flight[op.request_id] = op
            sent += 1
        if not in_flight:
            return []
        done = server.wait_any({i for i in in_flight if i > 0}, timeout)
        for rid in done:
            op = in_flight.pop(rid)
            answer = server.take(rid)
            assert "result" in answer, f"JSON-RPC error: {answer}"
            lane.ack(op, answer["result"])
        if not done:
            if server.eof:
                # Answers can still sit in the pipe buffer of a dead process: collect them all.
                server.drain()
                for rid in [i for i in in_flight if i in server.responses]:
                    lane.ack(in_flight.pop(rid), server.take(rid)["result"])
                return list(in_flight.values())
            raise TimeoutError(f"no answer within {timeout}s from a live server; stderr: "
                               f"{server.stderr_text()[-2000:]}")
