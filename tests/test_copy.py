"""``graph-memory copy``: a whole memory moved between databases — SQLite into PostgreSQL and back,
SQLite into SQLite — exactly (exports byte-identical, the timestamps view identical, inverse
marks, import records and the first-start duty kept), only into an empty destination, all or
nothing, the source never written, and the password never shown. PostgreSQL runs in the test
session's throwaway cluster (tests/pgcluster.py)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from graph_memory import copying
from graph_memory.db.backend import open_backend
from graph_memory.errors import GraphError, InvalidCursor, OutputError
from graph_memory.models import Entity, ObservationUpdate, Relation
from graph_memory.service import MemoryService, copy_memory, export_graph, import_file, stats
from graph_memory.settings import Settings

from pgcluster import PASSWORD, Cluster

EXE = Path(sys.executable).with_name("graph-memory")
INVERSES = {"manages": "reports_to", "reports_to": "manages"}

LEGACY = [  # imported: their times are unknown
    {"type": "entity", "name": "Zoë", "entityType": "person", "observations": ["İstanbul'da yaşar", "nul\u0000inside"]},
    {"type": "entity", "name": "Acme\u0000Corp", "entityType": "organization", "observations": []},
    {"type": "entity", "name": "😀 emoji", "entityType": "thing", "observations": ["ẞ big sharp s"]},
    {"type": "relation", "from": "Zoë", "to": "Acme\u0000Corp", "relationType": "works_at", "weight": 0.25},
    {"type": "relation", "from": "😀 emoji", "to": "Zoë", "relationType": "cheers"},
    {"type": "relation", "from": "Zoë", "to": "Nobody", "relationType": "dangles"},
]


def sqlite_settings(path: Path) -> Settings:
    return Settings.load(file_path=path)


def file_bytes(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def source(tmp_path: Path) -> Settings:
    """A SQLite memory with imported rows (unknown times), later changes (known times), NUL and
    unicode, weights, a dangling relation and materialized inverses."""
    legacy = tmp_path / "legacy.jsonl"
    legacy.write_text("".join(json.dumps(line) + "\n" for line in LEGACY), encoding="utf-8")
    settings = sqlite_settings(tmp_path / "source.db")
    import_file(settings, str(legacy))
    backend = open_backend(settings)
    try:
        memory = MemoryService(backend, inverses=INVERSES)
        memory.create_entities([Entity("Bob", "person", ["likes tea", "x\u0000y"]),
                                Entity("Καλημέρα", "greeting", ["ΣΊΣΥΦΟΣ"])])
        memory.add_observations([("Zoë", ["joined later"])])            # an imported entity changes
        memory.update_relations([Relation("Zoë", "Acme\u0000Corp", "works_at", 0.75)])  # re-weighed
        memory.update_observations([ObservationUpdate("Bob", "likes tea", "likes green tea")])
        memory.create_relations([Relation("Bob", "Zoë", "manages")])   # + Zoë -[reports_to]-> Bob
        memory.update_relations([Relation("Bob", "Zoë", "manages", 0.5)])
    finally:
        backend.close()
    return settings


def exported(settings: Settings, out: Path) -> bytes:
    export_graph(settings, out, with_weights=True)
    return out.read_bytes()


def snapshot(settings: Settings) -> dict[str, Any]:
    """Everything a copy must keep: the timestamps view, inverse marks, records, first-start duty."""
    backend = open_backend(settings, "current")
    try:
        graph = MemoryService(backend).read_graph(timestamps=True).shaped("full", True)
        inverses = backend.run_read(lambda g: g.inverse_links())
    finally:
        backend.close()
    info = stats(settings)
    return {"graph": graph, "inverses": inverses, "records": [r.to_dict() for r in info.records],
            "owes": info.owes, "counts": info.counts.to_dict()}


def test_sqlite_to_postgres_and_back_is_exact(source: Settings, postgres_url: str, tmp_path: Path) -> None:
    before = file_bytes(source.database_path)
    pg = Settings.load(database_url=postgres_url)
    back = sqlite_settings(tmp_path / "back.db")

    there = copy_memory(source, postgres_url)
    again = copy_memory(pg, str(back.database_path))

    assert (there.entities, there.observations, there.relations, there.inverse_relations, there.records) == \
        (5, 7, 5, 1, 1)
    assert again.to_dict() | {"source": "", "destination": ""} == there.to_dict() | {"source": "", "destination": ""}
    assert PASSWORD not in json.dumps(there.to_dict()) + json.dumps(again.to_dict())
    original = exported(source, tmp_path / "export-source.jsonl")   # not source.jsonl: the legacy file of source.db
    assert exported(pg, tmp_path / "pg.jsonl") == original
    assert exported(back, tmp_path / "export-back.jsonl") == original
    expected = snapshot(source)
    assert snapshot(pg) == expected and snapshot(back) == expected
    # The test means something: unknown times (imported), known ones (changed later), an inverse.
    zoe = next(e for e in expected["graph"]["entities"] if e["name"] == "Zoë")
    assert zoe["createdAt"] is None and zoe["updatedAt"] is not None
    assert [o["createdAt"] is None for o in zoe["observationTimes"]] == [True, True, False]
    assert expected["inverses"] == {("Zoë", "Bob", "reports_to"): "manages"}
    assert expected["owes"] is None and expected["records"][0]["kind"] == "import"
    assert file_bytes(source.database_path) == before   # the source was only read


def test_the_copy_searches_and_keeps_its_own_cursor_key(source: Settings, postgres_url: str, tmp_path: Path) -> None:
    copy_memory(source, postgres_url)
    back = sqlite_settings(tmp_path / "back.db")
    copy_memory(Settings.load(database_url=postgres_url), str(back.database_path))
    for settings in (Settings.load(database_url=postgres_url), back):
        backend = open_backend(settings, "current")
        try:
            memory = MemoryService(backend)
            assert [e.name for e in memory.search_nodes("i̇stanbul").entities] == ["Zoë"]   # str.lower() of İ
            assert [e.name for e in memory.search_nodes("green tea").entities] == ["Bob"]
            assert [e.name for e in memory.search_nodes("σίσυφος", "words").entities] == ["Καλημέρα"]
            assert [e.name for e in memory.search_nodes("\u0000").entities] == ["Zoë", "Acme\u0000Corp", "Bob"]
            # A cursor of the source is refused by the copy: each database signs its own.
            source_backend = open_backend(source, "current")
            try:
                cursor = MemoryService(source_backend).read_graph(limit=1).next_cursor
            finally:
                source_backend.close()
            with pytest.raises(InvalidCursor):
                memory.read_graph(limit=1, cursor=cursor)
        finally:
            backend.close()


def test_sqlite_to_sqlite_through_the_command(source: Settings, tmp_path: Path) -> None:
    dest = tmp_path / "moved.db"
    result = _run("--database", str(source.database_path), "copy", "--to", str(dest), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) | {"source": ""} == {
        "source": "", "destination": str(dest), "entities": 5, "observations": 7, "relations": 5,
        "inverse_relations": 1, "legacy_imports": 1, "legacy_first_start_pending": None}
    moved = sqlite_settings(dest)
    assert exported(moved, tmp_path / "export-moved.jsonl") == exported(source, tmp_path / "export-source.jsonl")
    assert snapshot(moved) == snapshot(source)


def test_a_fresh_source_carries_its_first_start_duty(tmp_path: Path) -> None:
    fresh = sqlite_settings(tmp_path / "fresh.db")
    open_backend(fresh).close()   # created by a start that has not imported yet: it owes 'import'
    result = copy_memory(fresh, str(tmp_path / "copy.db"))
    assert result.first_start == "import" and stats(sqlite_settings(tmp_path / "copy.db")).owes == "import"


@pytest.mark.parametrize("kind", ["postgres", "sqlite"])
def test_a_destination_that_is_not_empty_is_refused_and_unchanged(source: Settings, postgres_url: str,
                                                                  tmp_path: Path, kind: str) -> None:
    dest = postgres_url if kind == "postgres" else str(tmp_path / "full.db")
    settings = Settings.load(database_url=postgres_url) if kind == "postgres" else sqlite_settings(Path(dest))
    backend = open_backend(settings)
    try:
        MemoryService(backend).create_entities([Entity("Bob", "robot", ["already here"])])
    finally:
        backend.close()
    before = exported(settings, tmp_path / "before.jsonl"), snapshot(settings)

    with pytest.raises(OutputError, match=r"already holds 1 entity, 0 relations; .*never merges"):
        copy_memory(source, dest)
    assert (exported(settings, tmp_path / "after.jsonl"), snapshot(settings)) == before


@pytest.mark.parametrize("kind", ["postgres", "sqlite"])
def test_a_copy_interrupted_midway_leaves_the_destination_empty(source: Settings, postgres_url: str, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    dest = postgres_url if kind == "postgres" else str(tmp_path / "dest.db")
    settings = Settings.load(database_url=postgres_url) if kind == "postgres" else sqlite_settings(Path(dest))
    monkeypatch.setattr(copying, "BATCH", 2)   # several batches, so the interruption is mid-copy
    written: list[int] = []

    def interrupt(rows: int) -> None:
        written.append(rows)
        if len(written) == 3:   # the user presses Ctrl-C after two batches were written
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        copy_memory(source, dest, progress=interrupt)
    empty = snapshot(settings)
    assert empty["graph"]["entities"] == [] and empty["graph"]["relations"] == []
    assert empty["records"] == [] and empty["owes"] == "import" and empty["counts"]["entities"] == 0
    copy_memory(source, dest)   # nothing was left behind: the copy can simply be run again
    assert snapshot(settings) == snapshot(source)


def test_a_destination_that_is_the_source_or_not_a_database_is_refused(source: Settings, tmp_path: Path) -> None:
    for dest, message in ((str(source.database_path), "names the database being copied"),
                          (str(tmp_path / "memory.jsonl"), "legacy JSONL/JSON file name"),
                          ("mysql://u:pw@h/db", "not a 'mysql' URL")):
        with pytest.raises(OutputError, match=message):
            copy_memory(source, dest)
    assert not (tmp_path / "memory.db").exists()



@pytest.mark.parametrize("suffix", ["-wal", "-shm", "-journal"])
def test_a_destination_beside_the_source_as_its_journal_is_refused(source: Settings, tmp_path: Path,
                                                                   suffix: str) -> None:
    link = tmp_path / "link.db"
    link.symlink_to(source.database_path)
    for named_by, dest in ((source, f"{source.database_path}{suffix}"), (sqlite_settings(link), f"{link}{suffix}"),
                           (sqlite_settings(link), f"{source.database_path}{suffix}")):
        with pytest.raises(OutputError, match="a file SQLite keeps beside the database being copied"):
            copy_memory(named_by, dest)
        assert not Path(dest).exists()


def test_a_destination_that_cannot_be_used_is_refused_naming_to_not_the_source_settings(
        source: Settings, postgres_url: str, tmp_path: Path) -> None:
    (tmp_path / "folder").mkdir()
    (tmp_path / "plain").write_text("not a database\n")
    wrong = postgres_url.replace(PASSWORD, "hunter2-wrong")
    for dest in (str(tmp_path / "folder"), str(tmp_path / "plain" / "x.db"), str(tmp_path / "plain"), wrong):
        with pytest.raises(GraphError) as refused:
            copy_memory(source, dest)
        message = str(refused.value)
        assert "--to" in message, message
        assert "MEMORY_FILE_PATH" not in message and "--database" not in message, message
        assert "MEMORY_DATABASE_URL" not in message and "MEMORY_DATABASE_PASSWORD_FILE" not in message, message
    assert (tmp_path / "plain").read_text() == "not a database\n" and not any((tmp_path / "folder").iterdir())

def test_the_password_never_shows(source: Settings, postgres_url: str, tmp_path: Path) -> None:
    moved = _run("--database", str(source.database_path), "copy", "--to", postgres_url)
    refused = _run("--database", str(source.database_path), "copy", "--to", postgres_url)
    back = _run("copy", "--to", str(tmp_path / "back.db"), env={"MEMORY_DATABASE_URL": postgres_url})
    wrong = _run("--database", str(source.database_path), "copy", "--to",
                 postgres_url.replace(PASSWORD, "hunter2-wrong"))
    assert moved.returncode == 0 and back.returncode == 0, moved.stderr + back.stderr
    assert refused.returncode == 1 and "already holds 5 entities" in refused.stderr
    assert wrong.returncode == 1 and "cannot be reached" in wrong.stderr
    assert "copied" in moved.stdout and ":***@127.0.0.1" in moved.stdout
    for result in (moved, refused, back, wrong):
        assert PASSWORD not in result.stdout + result.stderr
        assert "hunter2-wrong" not in result.stdout + result.stderr


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORY_", "PG"))}
    command = [str(EXE)] if EXE.exists() else [sys.executable, "-m", "graph_memory"]
    return subprocess.run([*command, *args], env=base | (env or {}), capture_output=True, text=True, timeout=120,
                          check=False)


def test_postgres_to_postgres_is_exact(source: Settings, postgres_url: str, postgres_cluster: Cluster,
                                       tmp_path: Path) -> None:
    copy_memory(source, postgres_url)
    other = postgres_cluster.create_database()
    try:
        result = copy_memory(Settings.load(database_url=postgres_url), postgres_cluster.url(other))
        assert result.destination == postgres_cluster.url(other).replace(f":{PASSWORD}@", ":***@")
        moved = Settings.load(database_url=postgres_cluster.url(other))
        assert exported(moved, tmp_path / "export-moved.jsonl") == exported(source, tmp_path / "export-source.jsonl")
        assert snapshot(moved) == snapshot(source)
    finally:
        postgres_cluster.drop_database(other)
