"""The PostgreSQL backend against a real PostgreSQL server (the session's throwaway cluster,
tests/pgcluster.py): the same graph as SQLite call by call, text exactly as given, migrations
under a lock, several replicas on one database, the data commands, and a password that never
shows. In CI a missing PostgreSQL fails these tests (conftest.postgres_cluster)."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graph_memory import cli
from graph_memory.db.backend import Backend, Graph, SqliteBackend, open_backend
from graph_memory.db.graph import ObservationUpdate
from graph_memory.db.postgres.backend import known_migrations
from graph_memory.db.postgres.text import decode, encode, needs_check
from graph_memory.db.store import Store
from graph_memory.errors import GraphError, MigrationError, StoreError
from graph_memory.logs import get_logger
from graph_memory.models import Entity, GraphSlice, Relation
from graph_memory.service import MemoryService, TypedValue, backup, export_graph, first_start, import_file, stats
from graph_memory.settings import Settings

from pgcluster import PASSWORD, Cluster

EXE = Path(sys.executable).with_name("graph-memory")


@pytest.fixture
def pg_settings(postgres_url: str, tmp_path: Path) -> Settings:
    return Settings.load(database_url=postgres_url, file_path=tmp_path / "memory.jsonl")


@pytest.fixture
def pg(pg_settings: Settings) -> Iterator[Backend]:
    backend = open_backend(pg_settings)
    yield backend
    backend.close()


# -- text exactly as given ----------------------------------------------------------------------------

@given(st.text(alphabet=st.sampled_from(["a", "\0", "\U0010ffff", "\U0010fffe", "é", "\n"])))
def test_the_nul_escape_is_reversible_and_prefix_free(text: str) -> None:
    assert decode(encode(text)) == text and "\0" not in encode(text)
    for cut in range(len(text) + 1):  # a prefix of the text is a prefix of the encoded text
        assert encode(text).startswith(encode(text[:cut]))


@given(st.text(alphabet=st.sampled_from(["a", "0", "\0", "\U0010ffff", "\U0010fffe"]), max_size=6),
       st.text(alphabet=st.sampled_from(["a", "0", "\0", "\U0010ffff", "\U0010fffe"]), min_size=1, max_size=3))
def test_an_encoded_substring_match_is_a_real_one_unless_the_needle_is_checked(text: str, needle: str) -> None:
    if needle in text:
        assert encode(needle) in encode(text)
    elif encode(needle) in encode(text):
        assert needs_check(needle)


def test_nul_and_noncharacters_are_stored_returned_and_found_unchanged(pg: Backend) -> None:
    memory = MemoryService(pg)
    odd = ["nul\0inside", "\U0010ffff\0", "\0", "ẞİ\U0010fffe"]
    memory.create_entities([Entity("N\0me", "ty\0pe", odd)])
    memory.create_relations([Relation("N\0me", "N\0me", "self\0")])
    graph = memory.read_graph()
    assert graph.entities == [Entity("N\0me", "ty\0pe", odd)] and graph.relations == [Relation("N\0me", "N\0me",
                                                                                                "self\0")]
    for query in ("\0", "l\0i", "\U0010ffff", "\0inside", "ßi̇", "ẞİ"):
        assert [e.name for e in memory.search_nodes(query).entities] == ["N\0me"], query
    assert memory.search_nodes("\U0010fffe\0").entities == []
    assert memory.delete_observations([("N\0me", ["\0"])]).results[0].deleted == ["\0"]


# -- the same graph as SQLite, call by call -------------------------------------------------------------

_NAMES = ["Ada", "Bob", "İlse", "STRASSE", "ẞig", "50%_off", "back\\slash", "n\0l", "Σίσυφος", "x"]
_TEXTS = ["likes tea", "İstanbul trip", "ẞ is capital sharp s", "ΣΊΣΥΦΟΣ", "100% sure_ish", "a\\b", "nul\0here",
          "multi\nline", "tea time", "TEA", "short", "rock", "Race: elf", "Race: dwarf", "x"]
_QUERIES = ["", "tea", "TEA", "i̇", "İ", "ß", "ẞ", "σ", "ς", "%", "_", "\\", "\0", "e\nl", "\nl", "ea ti", "a", "Ra",
            "rock tea", "x y", "strasse", "50%_", "   ", "ΣΊ", "Race: "]
_FTS = ["tea", "tea OR rock", "tea NOT time", "name: ada", "^rac", "\"tea time\"", "sha*", "entityType: per",
        "-name: tea", "ab", "NEAR(tea time)", "tea +", "x AND"]


def _outcome(run: Callable[[], Any]) -> Any:
    try:
        return ("ok", _plain(run()))
    except GraphError as exc:
        return ("error", type(exc).__name__, str(exc))


def _plain(value: Any) -> Any:
    if isinstance(value, GraphSlice):
        return value.to_dict()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if hasattr(value, "__dataclass_fields__"):
        return {k: _plain(getattr(value, k)) for k in value.__dataclass_fields__}
    return value


def _unordered(outcome: Any) -> Any:
    """A search outcome with its lists as sets (words and fts rank differently on PostgreSQL)."""
    if outcome[0] != "ok":
        return outcome
    return {key: sorted(json.dumps(item, sort_keys=True) for item in items) for key, items in outcome[1].items()}


def _scenario(rng: random.Random, memory: MemoryService) -> Iterator[tuple[str, Callable[[], Any]]]:
    """A seeded random sequence of calls (the same for any backend given the same seed)."""
    def name() -> str:
        return rng.choice(_NAMES)

    def texts(k: int) -> list[str]:
        return [rng.choice(_TEXTS) for _ in range(rng.randint(0, k))]

    for _ in range(70):
        kind = rng.randrange(14)
        if kind <= 2:
            entities = [Entity(name(), rng.choice(["person", "Place", "İdea"]), texts(3)) for _ in range(2)]
            yield "create_entities", lambda e=entities: memory.create_entities(e)
        elif kind == 3:
            relations = [Relation(name(), name(), rng.choice(["knows", "likes"]), rng.choice([1.0, 0.5]))]
            yield "create_relations", lambda r=relations: memory.create_relations(r)
        elif kind == 4:
            items = [(name(), texts(3))]
            yield "add_observations", lambda i=items: memory.add_observations(i)
        elif kind == 5:
            names = [name()]
            yield "delete_entities", lambda n=names: memory.delete_entities(n)
        elif kind == 6:
            items = [(name(), texts(2))]
            yield "delete_observations", lambda i=items: memory.delete_observations(i)
        elif kind == 7:
            updates = [ObservationUpdate(name(), rng.choice(_TEXTS), rng.choice(_TEXTS))]
            yield "update_observations", lambda u=updates: memory.update_observations(u)
        elif kind == 8:
            relations = [Relation(name(), name(), rng.choice(["knows", "likes"]), rng.random())]
            yield "update_relations", lambda r=relations: memory.update_relations(r)
            yield "delete_relations", lambda r=relations: memory.delete_relations(r if rng.random() < 0.3 else [])
        elif kind == 9:
            values = [TypedValue("Race: ", rng.choice(["Race: elf", "Race: orc", None]), "knows", [name()])]
            who = name()
            yield "update_typed", lambda v=values, w=who: memory.update_typed("person", w, v, "update_person")
        elif kind == 10:
            names = [name(), name()]
            yield "open_nodes", lambda n=names: memory.open_nodes(n)
        else:
            query, limit = rng.choice(_QUERIES), rng.choice([None, None, 1, 2])
            yield "search substring", lambda q=query, lim=limit: memory.search_nodes(q, "substring", lim)
            yield "search words", lambda q=query: memory.search_nodes(q, "words")
            fts = rng.choice(_FTS)
            if "NEAR" not in fts and "+" not in fts:
                yield "search fts", lambda q=fts: memory.search_nodes(q, "fts")
    yield "read_graph", memory.read_graph


@pytest.mark.parametrize("seed", range(6))
def test_random_scenarios_give_the_same_results_and_errors_on_both_backends(seed: int, pg: Backend,
                                                                            tmp_path: Path) -> None:
    store = Store.open(tmp_path / "memory.db")
    try:
        lite = list(_scenario(random.Random(seed), MemoryService(SqliteBackend(store))))
        post = list(_scenario(random.Random(seed), MemoryService(pg)))
        for (what, on_sqlite), (_, on_postgres) in zip(lite, post, strict=True):
            expected, got = _outcome(on_sqlite), _outcome(on_postgres)
            if what in ("search words", "search fts"):
                expected, got = _unordered(expected), _unordered(got)
            assert got == expected, what
    finally:
        store.close()


def test_fts_near_and_phrase_concatenation_are_refused_clearly(pg: Backend) -> None:
    memory = MemoryService(pg)
    for query, word in (("NEAR(tea time)", "NEAR"), ("tea + time", "concatenation")):
        with pytest.raises(GraphError, match=f"{word}.*not supported by the PostgreSQL backend"):
            memory.search_nodes(query, "fts")
    with pytest.raises(GraphError, match="shorter than 3 characters"):
        memory.search_nodes("ab", "fts")


def test_words_rank_by_the_weighted_fields_the_terms_hit(pg: Backend) -> None:
    memory = MemoryService(pg)
    memory.create_entities([Entity("a", "thing", ["tea tea"]), Entity("b", "tea", []), Entity("tea", "t", [])])
    assert [e.name for e in memory.search_nodes("tea", "words").entities] == ["tea", "b", "a"]


# -- many replicas on one database ----------------------------------------------------------------------

def test_four_replicas_writing_at_once_lose_nothing(pg_settings: Settings, pg: Backend) -> None:
    MemoryService(pg).create_entities([Entity("hub", "place", [])])
    errors: list[BaseException] = []

    def replica(number: int) -> None:
        backend = open_backend(pg_settings)
        memory = MemoryService(backend)
        try:
            for i in range(25):
                memory.create_entities([Entity(f"r{number}-{i}", "t", [f"fact {i}"])])
                memory.add_observations([("hub", [f"visit {number}-{i}"])])
                memory.create_relations([Relation(f"r{number}-{i}", "hub", "visits")])
                memory.update_relations([Relation(f"r{number}-{i}", "hub", "visits", 0.0)])
        except BaseException as exc:
            errors.append(exc)
        finally:
            backend.close()

    threads = [threading.Thread(target=replica, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    graph = MemoryService(pg).read_graph()
    assert len(graph.entities) == 101 and len(graph.relations) == 100
    assert len(graph.entities[0].observations) == 100
    assert {r.weight for r in graph.relations} == {0.5}
    found = MemoryService(pg).search_nodes("visit 3-24")
    assert [e.name for e in found.entities] == ["hub"]


def test_psycopg_does_not_warn_of_leaving_a_pipeline_whose_error_is_handled(caplog: pytest.LogCaptureFixture) -> None:
    """A write conflict between replicas is retried: psycopg's warning that leaving the failed
    attempt's pipeline failed too showed up in the logs of normal operation (found by QA); any
    other psycopg warning still does."""
    import logging

    import psycopg

    import graph_memory.db.postgres.backend  # noqa: F401  (installs the filter)

    psycopg_log = logging.getLogger("psycopg")
    with caplog.at_level("WARNING", logger="psycopg"):
        psycopg_log.warning("error ignored terminating %r: %s", "<psycopg.Pipeline [INERROR]>",
                            psycopg.errors.PipelineAborted("pipeline aborted"))
        psycopg_log.warning("error ignored terminating %r: %s", "<psycopg.Copy>", psycopg.OperationalError("lost"))
    assert [r.getMessage() for r in caplog.records] == ["error ignored terminating '<psycopg.Copy>': lost"]


def test_ten_replicas_starting_together_migrate_once(postgres_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORY_", "PG"))}
    env["MEMORY_DATABASE_URL"] = postgres_url
    command = [str(EXE)] if EXE.exists() else [sys.executable, "-m", "graph_memory"]
    procs = [subprocess.Popen([*command, "migrate"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(10)]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 10, [e.decode() for _, e in outputs]
    applied = [o.decode() for o, _ in outputs if "applied 0001_initial" in o.decode()]
    assert len(applied) == 1
    latest = known_migrations()[-1].id
    assert all(f"is up to date at schema version {latest}" in o.decode() for o, _ in outputs)


def test_a_change_on_one_replica_is_counted_by_the_others_but_not_its_own(pg_settings: Settings,
                                                                         pg: Backend) -> None:
    other = open_backend(pg_settings)
    try:
        baseline = pg.change_counters()
        MemoryService(pg).create_entities([Entity("mine", "t", [])])
        assert pg.change_counters() == baseline
        MemoryService(other).create_entities([Entity("theirs", "t", [])])
        MemoryService(other).read_graph()  # a read notifies nothing
        assert baseline is not None
        assert pg.change_counters() == (baseline[0] + 1, baseline[0] + 1)
    finally:
        other.close()
    pg.close()
    assert pg.change_counters() is None


# -- migrations -----------------------------------------------------------------------------------------

def test_an_edited_or_newer_migration_history_is_refused(pg_settings: Settings, postgres_cluster: Cluster,
                                                         pg: Backend) -> None:
    name = pg_settings.database_url.get_secret_value().rsplit("/", 1)[1] if pg_settings.database_url else ""
    postgres_cluster.admin("UPDATE schema_migrations SET checksum = 'x' WHERE id = 1", dbname=name)
    with pytest.raises(MigrationError, match="applied migrations must never be edited"):
        open_backend(pg_settings)
    postgres_cluster.admin("INSERT INTO schema_migrations (id, name, checksum) VALUES (99, '0099_x', 'y')",
                           dbname=name)
    with pytest.raises(MigrationError, match="migrated by a newer graph-memory"):
        open_backend(pg_settings, "current")


# -- the data commands and the first start --------------------------------------------------------------

_LEGACY = ('{"type":"entity","name":"Ada","entityType":"person","observations":["likes tea","n\\u0000l"]}\n'
           '{"type":"entity","name":"Bob","entityType":"person","observations":[]}\n'
           '{"type":"relation","from":"Ada","to":"Bob","relationType":"knows","weight":0.5}\n'
           '{"type":"relation","from":"Ada","to":"Nobody","relationType":"knows"}\n')


def test_first_start_imports_the_legacy_file_once_and_creates_no_sqlite_file(pg_settings: Settings,
                                                                             tmp_path: Path) -> None:
    legacy = tmp_path / "memory.jsonl"
    legacy.write_text(_LEGACY, encoding="utf-8")
    for expected in (2, None):
        backend = open_backend(pg_settings)
        try:
            report = first_start(backend, pg_settings, get_logger("test"))
        finally:
            backend.close()
        assert (report.entities_created if report else None) == expected
    result = stats(pg_settings)
    assert (result.counts.entities, result.counts.relations, result.counts.dangling_relations) == (2, 2, 1)
    assert [r.kind for r in result.records] == ["first_start"] and result.owes is None
    assert result.backend == "postgres" and PASSWORD not in json.dumps(result.to_dict())
    assert ":***@" in result.to_dict()["database"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memory.jsonl"]


def test_a_legacy_file_moved_to_another_folder_is_recorded_as_moved_and_new_lines_follow_it(
        postgres_url: str, tmp_path: Path) -> None:
    """The same database, its legacy file moved (e.g. into a container's /data): recorded as
    ``moved`` (migration 0005), nothing imported again; then ``import --new-lines`` of the
    moved file merges only its new line."""
    old, new = tmp_path / "a" / "memory.jsonl", tmp_path / "b" / "memory.jsonl"
    old.parent.mkdir()
    new.parent.mkdir()
    old.write_text(_LEGACY, encoding="utf-8")

    def start(legacy: Path) -> Settings:
        settings = Settings.load(database_url=postgres_url, file_path=legacy)
        backend = open_backend(settings)
        try:
            first_start(backend, settings, get_logger("test"))
            backend.run_write(lambda g: g.delete_entities(["Bob"]))
        finally:
            backend.close()
        return settings

    start(old)                           # imports Ada and Bob; Bob deleted since
    new.write_bytes(old.read_bytes())
    settings = start(new)
    result = stats(settings)
    assert [(r.kind, r.path) for r in result.records] == [("first_start", str(old)), ("moved", str(new))]
    assert result.counts.entities == 1   # Bob stays deleted
    with new.open("a", encoding="utf-8") as out:
        out.write('{"type":"entity","name":"Cy","entityType":"person","observations":[]}\n')
    report = import_file(settings, str(new), new_lines=True)
    assert (report.entities_created, report.lines_of) == (1, None)
    assert stats(settings).counts.entities == 2


def test_export_of_an_import_is_byte_identical_on_both_backends(pg_settings: Settings, tmp_path: Path) -> None:
    legacy = tmp_path / "in.jsonl"
    legacy.write_text(_LEGACY, encoding="utf-8")
    lite = Settings.load(file_path=tmp_path / "lite.db")
    for settings, out in ((lite, tmp_path / "lite.jsonl"), (pg_settings, tmp_path / "pg.jsonl")):
        import_file(settings, str(legacy))
        assert import_file(settings, str(legacy), dry_run=True).entities_merged == 2
        export_graph(settings, out, with_weights=True)
    assert (tmp_path / "pg.jsonl").read_bytes() == (tmp_path / "lite.jsonl").read_bytes()


def test_backup_refuses_postgres_with_the_pg_dump_command_and_no_password(pg_settings: Settings,
                                                                          tmp_path: Path) -> None:
    with pytest.raises(GraphError) as refused:
        backup(pg_settings, str(tmp_path / "copy"))
    message = str(refused.value)
    assert f"pg_dump --format=custom --file={tmp_path / 'copy'} " in message
    assert "graph-memory export --with-weights" in message and f"-o {tmp_path / 'copy'}.jsonl" in message
    assert PASSWORD not in message and not (tmp_path / "copy").exists()
    # A folder, as the README's backup examples give for SQLite: files named in it (pg_dump cannot
    # write to a folder, and the export went to a hidden file named ".jsonl": found by QA).
    (tmp_path / "backups").mkdir()
    for dest in (f"{tmp_path / 'backups'}/", str(tmp_path / "backups")):
        with pytest.raises(GraphError) as refused:
            backup(pg_settings, dest)
        named = re.search(r"--file=(\S+) ", str(refused.value))
        assert named is not None, str(refused.value)
        dump = Path(named.group(1))
        assert dump.parent == tmp_path / "backups" and re.fullmatch(r"memory-\d{8}-\d{6}\.dump", dump.name)
        assert f"-o {dump.with_suffix('.jsonl')}" in str(refused.value)
    assert list((tmp_path / "backups").iterdir()) == []


def test_cli_healthcheck_stats_and_migrate_name_the_backend_and_mask_the_password(
        postgres_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("MEMORY_DATABASE_URL", postgres_url)
    assert cli.main(["migrate", "--check"]) == cli.EXIT_PENDING
    assert cli.main(["healthcheck"]) == cli.EXIT_ERROR
    assert cli.main(["migrate"]) == cli.EXIT_OK
    assert cli.main(["healthcheck"]) == cli.EXIT_OK
    assert cli.main(["stats"]) == cli.EXIT_OK
    out, err = capsys.readouterr()
    assert "MEMORY_DATABASE_URL=postgresql://graph@127.0.0.1" in err  # the migrate hint, without a password
    assert "(postgres)" in out and "ok: postgresql://graph:***@127.0.0.1" in out
    assert PASSWORD not in out + err


def test_a_wrong_password_is_refused_without_showing_it(postgres_cluster: Cluster, postgres_url: str,
                                                        tmp_path: Path) -> None:
    wrong = postgres_url.replace(PASSWORD, "hunter2-wrong")
    with pytest.raises(StoreError, match="cannot be reached") as refused:
        open_backend(Settings.load(database_url=wrong))
    assert "hunter2-wrong" not in str(refused.value) and ":***@" in str(refused.value)
    secret = tmp_path / "password"
    secret.write_text(PASSWORD + "\n")
    without = postgres_url.replace(f":{PASSWORD}", "")
    backend = open_backend(Settings.load(database_url=without, database_password_file=secret))
    try:
        assert backend.path == without and backend.kind == "postgres"
    finally:
        backend.close()


# -- the real server over stdio, against SQLite -----------------------------------------------------------

async def _drive(env: dict[str, str]) -> list[Any]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    command = str(EXE) if EXE.exists() else sys.executable
    args = [] if EXE.exists() else ["-m", "graph_memory"]
    calls: list[tuple[str, dict[str, Any]]] = [
        ("create_entities", {"entities": [{"name": "Ada", "entityType": "person", "observations": ["İstanbul", "t\0"]},
                                          {"name": "Bob", "entityType": "person", "observations": []}]}),
        ("create_relations", {"relations": [{"from": "Ada", "to": "Bob", "relationType": "knows"}]}),
        ("create_relations", {"relations": [{"from": "Ada", "to": "Zed", "relationType": "knows"}]}),
        ("add_observations", {"observations": [{"entityName": "Bob", "contents": ["ẞ", "x"]}]}),
        ("add_observations", {"observations": [{"entityName": "Zed", "contents": ["x"]}]}),
        ("update_observations", {"updates": [{"entityName": "Bob", "match": "x", "replacement": "y"}]}),
        ("update_observations", {"updates": [{"entityName": "Bob", "match": "x", "replacement": "z"}]}),
        ("update_relations", {"relations": [{"from": "Ada", "to": "Bob", "relationType": "knows", "weight": 0.2}]}),
        ("search_nodes", {"query": "i̇"}),
        ("search_nodes", {"query": "ß"}),
        ("search_nodes", {"query": "person", "limit": 1}),
        ("search_nodes", {"query": "ada", "mode": "words"}),
        ("search_nodes", {"query": "name: ada", "mode": "fts"}),
        ("search_nodes", {"query": "(", "mode": "fts"}),
        ("open_nodes", {"names": ["Bob", "Nobody"]}),
        ("delete_observations", {"deletions": [{"entityName": "Bob", "observations": ["y", "q"]}]}),
        ("delete_relations", {"relations": [{"from": "Ada", "to": "Bob", "relationType": "knows"}]}),
        ("delete_entities", {"entityNames": ["Bob", "Nobody"]}),
        ("read_graph", {}),
    ]
    results: list[Any] = []
    async with Client(StdioServerParameters(command=command, args=args, env=env), mode="legacy") as client:
        for tool, arguments in calls:
            result = await client.call_tool(tool, arguments)
            # A cursor is signed with its database's own secret: its presence is compared, not its bytes.
            texts = [re.sub(r'"nextCursor": "[^"]*"', '"nextCursor": "…"', c.text)
                     for c in result.content if hasattr(c, "text")]
            structured = result.structured_content
            if structured is not None and "nextCursor" in structured:
                structured = {**structured, "nextCursor": "…"}
            results.append((tool, result.is_error, texts, structured))
    return results


@pytest.mark.anyio
async def test_every_tool_over_stdio_answers_as_the_sqlite_server_does(postgres_url: str, tmp_path: Path) -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORY_", "PG"))}
    base.update(MEMORY_LOG_FORMAT="json", HOME=str(tmp_path))
    on_sqlite = await _drive({**base, "MEMORY_FILE_PATH": str(tmp_path / "m.db")})
    on_postgres = await _drive({**base, "MEMORY_DATABASE_URL": postgres_url,
                                "MEMORY_FILE_PATH": str(tmp_path / "pg" / "memory.jsonl")})
    assert on_postgres == on_sqlite
    assert not (tmp_path / "pg").exists()


def _writer(env: dict[str, str], number: int) -> subprocess.Popen[bytes]:
    command = [str(EXE)] if EXE.exists() else [sys.executable, "-m", "graph_memory"]
    requests = [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    for i in range(30):
        requests.append({"jsonrpc": "2.0", "id": 1 + i, "method": "tools/call", "params": {
            "name": "create_entities", "arguments": {"entities": [
                {"name": f"w{number}-{i}", "entityType": "t", "observations": [f"o{i}"]}]}}})
        requests.append({"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call", "params": {
            "name": "add_observations", "arguments": {"observations": [
                {"entityName": "hub", "contents": [f"from {number}-{i}"]}]}}})
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=env)
    assert proc.stdin is not None
    proc.stdin.write("".join(json.dumps(r) + "\n" for r in requests).encode())
    proc.stdin.close()
    return proc


def test_several_server_processes_writing_at_once_lose_nothing(postgres_url: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORY_", "PG"))}
    env.update(MEMORY_DATABASE_URL=postgres_url, MEMORY_LOG_FORMAT="json", HOME=str(tmp_path))
    settings = Settings.load(database_url=postgres_url)
    backend = open_backend(settings)
    try:
        MemoryService(backend).create_entities([Entity("hub", "place", [])])
        procs = [_writer(env, n) for n in range(3)]
        for proc in procs:
            assert proc.stdout is not None
            replies = [json.loads(line) for line in proc.stdout.read().splitlines()]
            assert proc.wait(timeout=120) == 0
            assert len(replies) == 61 and not any(r.get("result", {}).get("isError") for r in replies)
        graph = MemoryService(backend).read_graph()
        assert len(graph.entities) == 91 and len(graph.entities[0].observations) == 90
    finally:
        backend.close()


# -- notifications across replicas --------------------------------------------------------------------

@pytest.mark.anyio
async def test_a_subscriber_of_one_replica_hears_of_a_write_through_another(pg_settings: Settings,
                                                                            pg: Backend) -> None:
    import anyio
    import mcp_types as types
    from mcp import Client

    from graph_memory.mcp.server import build_server

    from helpers import subscribe_legacy

    heard: list[str] = []

    async def inbox(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            heard.append(str(message.params.uri))

    other = open_backend(pg_settings)
    try:
        server = build_server(MemoryService(pg)).server
        async with Client(server, mode="legacy", message_handler=inbox) as watcher:
            await subscribe_legacy(watcher)
            for count, name in enumerate(("Alice", "Bob"), start=1):
                MemoryService(other).create_entities([Entity(name, "person", [])])
                with anyio.fail_after(5):
                    while len(heard) < count:
                        await anyio.sleep(0.05)
            await anyio.sleep(1.2)  # two more looks: nothing else was written
            assert heard == ["memory://knowledge-graph"] * 2
    finally:
        other.close()


def test_two_replicas_starting_at_once_on_an_empty_database_import_the_legacy_file_once(
        pg_settings: Settings, tmp_path: Path) -> None:
    (tmp_path / "memory.jsonl").write_text(_LEGACY, encoding="utf-8")
    reports: list[Any] = []
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def replica() -> None:
        try:
            start.wait()
            backend = open_backend(pg_settings)
            try:
                reports.append(first_start(backend, pg_settings, get_logger("test")))
            finally:
                backend.close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=replica) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(r is None for r in reports) == [False, True]
    result = stats(pg_settings)
    assert (result.counts.entities, [r.kind for r in result.records]) == (2, ["first_start"])


@pytest.mark.both_backends
def test_a_huge_limit_is_no_limit_on_both_backends(graph_backend: Backend) -> None:
    memory = MemoryService(graph_backend)
    memory.create_entities([Entity("tea", "t", []), Entity("teapot", "t", [])])
    for mode in ("substring", "words", "fts"):
        assert len(memory.search_nodes("tea", mode, 10**30).entities) == 2


def test_a_database_url_of_another_scheme_is_refused_without_echoing_it() -> None:
    from graph_memory.errors import SettingsError

    with pytest.raises(SettingsError, match=r"MEMORY_DATABASE_URL: .*must be a URL starting with postgresql://") \
            as refused:
        Settings.load(database_url="mysql://user:pa55word@host/db")
    assert "pa55word" not in str(refused.value)
    masked = Settings.load(database_url="postgresql://u:pa55word@h/db?password=pa55word&sslmode=require")
    assert masked.database_label == "postgresql://u:***@h/db?password=***&sslmode=require"
    assert "pa55word" not in repr(masked)



@pytest.mark.parametrize("url", ["postgresql://u:Pa55-word@[::1/db",                 # libpq quotes the whole URL
                                 "postgresql://u:Pa55%zzword@127.0.0.1:1/db",       # ... or the bad token
                                 "postgresql://u@127.0.0.1:1/db?password=Pa55%zzword",
                                 "postgresql://u:Pa55-word@127.0.0.1:1/db?bogus=1"])
def test_a_url_libpq_cannot_parse_is_refused_without_its_password(url: str, tmp_path: Path) -> None:
    with pytest.raises(StoreError) as refused:
        open_backend(Settings.load(database_url=url))
    assert "Pa55" not in str(refused.value) and "***" in str(refused.value)
    Store.open(tmp_path / "m.db").close()  # a source to copy, so the destination is opened
    result = subprocess.run([str(EXE), "copy", "--database", str(tmp_path / "m.db"), "--to", url],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and "error on postgresql://" in result.stderr
    assert "Pa55" not in result.stdout + result.stderr

# -- the reading options, MemoryMesh edits and the view's reads: the same answers as SQLite ----------


def _web(backend: Backend) -> None:
    """A seeded graph with neighbors, dangling relations, a materialized inverse and shared words."""
    rng = random.Random(7)
    entities = [Entity(f"E{i:02}", rng.choice(["person", "place", "thing"]),
                       [f"note {i}", rng.choice(["tea lover", "coffee", "green tea", "cello"])]) for i in range(20)]
    relations = [Relation(f"E{rng.randrange(20):02}", f"E{rng.randrange(20):02}", rng.choice(["knows", "near"]),
                          rng.choice([0.5, 1.0])) for _ in range(30)]
    backend.run_write(lambda g: g.create_entities(entities))
    backend.run_write(lambda g: g.create_inverses(g.create_relations(relations), {"knows": "known_by"}))
    backend.run_write(lambda g: g.insert_relation(Relation("E00", "Nowhere", "dangles")))
    backend.run_write(lambda g: g.replace_observations("E03", ["coffee", "tea lover"]))
    backend.run_write(lambda g: g.set_entity_type("E04", "robot"))
    backend.run_write(lambda g: g.move_relation(relations[0].key, ("E05", "E06", "moved"), 0.0))


def _reads(backend: Backend) -> dict[str, Any]:
    """Every paged read (limit 3, all modes) and the view's reads of ``backend``, times left out."""
    out: dict[str, Any] = {}
    pages: list[Any] = []
    position = None
    while True:
        page, position = backend.run_read(lambda g, at=position: g.read_page(None, at, 3))
        pages.append(page.to_dict())
        if position is None:
            break
    out["read_graph"] = pages
    for query, mode in (("tea", "substring"), ("", "substring"), ("e1", "substring"), ("tea", "words"),
                        ("tea OR cello", "fts")):
        found, after = [], None
        while True:
            page, after = backend.run_read(
                lambda g, q=query, m=mode, at=after: g.search_page(q, m, None, at, 3))
            found.append(page.to_dict())
            if after is None:
                break
        if mode == "substring":
            out[f"search {query!r}"] = found
        else:   # words and fts rank differently on PostgreSQL: the same rows, each once
            out[f"search {query!r} {mode}"] = {key: sorted(json.dumps(item, sort_keys=True) for p in found
                                                         for item in p[key]) for key in found[0]}
    out["neighborhood"] = backend.run_read(lambda g: g.neighborhood(["E01", "E02"], 2, 8)).to_dict()
    out["whole neighborhood"] = backend.run_read(lambda g: g.neighborhood(["E01"], 3, None)).to_dict()
    for name in ("E03", "E05", "Nowhere"):
        page_of = backend.run_read(lambda g, n=name: g.entity_page(n, 2))
        out[f"entity {name}"] = None if page_of is None else {
            k: v for k, v in page_of.to_dict().items() if k not in ("createdAt", "updatedAt", "observations")}
        if page_of is not None:
            out[f"observations {name}"] = [o.content for o in page_of.observations]
    out["types"] = backend.run_read(lambda g: g.type_counts(5))
    out["totals"] = backend.run_read(lambda g: g.totals())
    out["hubs"] = backend.run_read(lambda g: g.most_connected(5))
    # Which 8 changes are the latest depends on the clock: all of them are compared, and their order.
    recent = backend.run_read(lambda g: g.recent_changes(1000))
    assert [c.at for c in recent] == sorted((c.at for c in recent), reverse=True)
    assert len(backend.run_read(lambda g: g.recent_changes(8))) == 8
    out["recent"] = sorted((c.kind, c.entity, c.text, c.other) for c in recent)
    out["found"] = [e.to_dict() for e in backend.run_read(lambda g: g.find_entities("tea", "substring", 4))]
    out["inverses"] = sorted(backend.run_read(lambda g: g.inverse_links()).items())
    return out


def test_pages_mesh_edits_inverses_and_view_reads_answer_as_on_sqlite(pg: Backend, tmp_path: Path) -> None:
    lite = SqliteBackend(Store.open(tmp_path / "memory.db"))
    try:
        _web(lite)
        expected = _reads(lite)
    finally:
        lite.close()
    _web(pg)
    assert _reads(pg) == expected
    assert expected["inverses"] and expected["search 'tea'"][1]["neighbors"]   # the web covers them


def test_times_are_null_for_imported_rows_and_since_skips_them_until_they_change(pg_settings: Settings,
                                                                               pg: Backend, tmp_path: Path) -> None:
    legacy = tmp_path / "in.jsonl"
    legacy.write_text(_LEGACY, encoding="utf-8")
    import_file(pg_settings, str(legacy))
    whole = pg.run_read(lambda g: g.with_times(g.read_graph()))
    assert [e.times.entity for e in whole.entities if e.times] == [(None, None), (None, None)]
    assert [r.times for r in whole.relations] == [(None, None), (None, None)]
    assert pg.run_read(lambda g: g.read_page("2000-01-01T00:00:00.000Z", None, None))[0].to_dict() == {
        "entities": [], "relations": [], "neighbors": []}
    pg.run_write(lambda g: g.add_observations([("Bob", ["arrived"])]))
    pg.run_write(lambda g: g.update_relation_weights([(Relation("Ada", "Bob", "knows"), 1.0)]))
    changed, _ = pg.run_read(lambda g: g.read_page("2000-01-01T00:00:00.000Z", None, None))
    assert [e.name for e in changed.entities] == ["Bob"] and [r.weight for r in changed.relations] == [0.75]
    bob = pg.run_read(lambda g: g.with_times(g.open_nodes(["Bob"]))).entities[0]
    assert bob.times is not None and bob.times.entity.created_at is None
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", bob.times.entity.updated_at or "")
    assert pg.run_read(lambda g: g.entity_page("Ada", 5)).created_at == ""   # the view shows SQLite's ''


def test_each_database_has_its_own_cursor_secret(pg: Backend, pg_settings: Settings, postgres_cluster: Cluster
                                                 ) -> None:
    secret = pg.run_read(lambda g: g.cursor_secret())
    assert len(secret) == 32 and pg.run_read(lambda g: g.cursor_secret()) == secret
    other = open_backend(Settings.load(database_url=postgres_cluster.url(postgres_cluster.create_database()),
                                       file_path=pg_settings.file_path))
    try:
        assert other.run_read(lambda g: g.cursor_secret()) not in (secret, b"")
    finally:
        other.close()


def test_migration_0002_marks_first_start_imports_unknown_and_keeps_later_times(
        pg_settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    from graph_memory.db.migrations import load_migrations
    from graph_memory.db.postgres import backend as postgres_backend

    monkeypatch.setattr(postgres_backend, "known_migrations", lambda: load_migrations("postgres")[:1])
    old = open_backend(pg_settings)   # a database of the version before 0002, with a first-start import

    def first_start_rows(g: Graph) -> None:
        ada = g.insert_entity("Ada", "person")
        assert ada is not None
        g.insert_observations([(ada, "imported")])
        g.insert_relation(Relation("Ada", "Ada", "is"))
        g.insert_record("first_start", path="memory.jsonl", size_bytes=1, sha256="0", mtime="", mtime_ns=0,
                        counts=(1, 1, 1))

    try:
        old.run_write(first_start_rows)
        old.run_write(lambda g: g.add_observations([("Ada", ["learned later"])]))
    finally:
        old.close()
    monkeypatch.undo()
    pg = open_backend(pg_settings)   # applies 0002
    try:
        ada = pg.run_read(lambda g: g.with_times(g.read_graph()))
        assert ada.entities[0].times is not None
        assert ada.entities[0].times.entity.created_at is None
        assert ada.entities[0].times.entity.updated_at is not None   # its observation was added later
        assert [t.created_at is None for t in ada.entities[0].times.observations] == [True, False]
        assert [r.times for r in ada.relations] == [(None, None)]
        later = pg.run_read(lambda g: g.read_page("2000-01-01", None, None))[0]
        assert [e.name for e in later.entities] == ["Ada"] and later.relations == []
    finally:
        pg.close()


def test_the_trigram_indexes_keep_short_pending_lists(pg: Backend, postgres_url: str) -> None:
    """Migration 0003: a search reads a GIN index's pending list whole, so the limits stay small
    (the default 4 MB held ~1,000 documents and cost a one-hit search several milliseconds)."""
    import psycopg

    with psycopg.connect(postgres_url) as conn:
        options = dict(conn.execute("SELECT relname, reloptions FROM pg_class WHERE relname LIKE 'entity_search_%_trgm'"
                                    ).fetchall())
    assert options == {"entity_search_observations_trgm": ["gin_pending_list_limit=1024"],
                       "entity_search_name_trgm": ["gin_pending_list_limit=64"],
                       "entity_search_type_trgm": ["gin_pending_list_limit=64"]}
