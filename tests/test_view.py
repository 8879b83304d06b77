"""``graph-memory view`` without a browser: the JSON reads, their bounds, read-only opening, and the
guard (GET only, Host and Origin checks, security headers). The page itself is driven in a real
browser by tests/test_view_browser.py."""

from __future__ import annotations

import hashlib
import http.client
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from starlette.testclient import TestClient

from graph_memory.browse import GraphBrowser
from graph_memory.db import graph
from graph_memory.db.backend import open_backend
from graph_memory.db.store import Store
from graph_memory.errors import SettingsError
from graph_memory.models import MODES, Entity, Relation
from graph_memory.settings import Settings
from graph_memory.view.app import build_view_app

HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
ORIGINS = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
SCRIPT = Path(sys.executable).with_name("graph-memory")


def seed(path: Path) -> None:
    seed_database(Settings.load(file_path=path))


def seed_database(settings: Settings) -> None:
    """The graph the reads are tested on, in the database ``settings`` name (either backend)."""
    backend = open_backend(settings)
    try:
        backend.run_write(lambda g: g.create_entities([
            Entity("Alice", "person", ["likes green tea", "lives in Lyon"]),
            Entity("Bob", "person", ["plays the cello"]),
            Entity("Lyon", "city", ["in France"]),
            Entity("Hub", "topic", [f"fact {i}" for i in range(250)]),
        ]))
        backend.run_write(lambda g: g.create_entities([Entity(f"Spoke {i:03}", "spoke", []) for i in range(300)]))
        backend.run_write(lambda g: g.create_relations([
            Relation("Alice", "Bob", "knows", 0.5), Relation("Alice", "Lyon", "lives_in"),
            *[Relation("Hub", f"Spoke {i:03}", "has") for i in range(300)]]))
    finally:
        backend.close()


def files_digest(path: Path) -> dict[str, str | None]:
    """The bytes of the database and its -wal/-shm (None when absent)."""
    out: dict[str, str | None] = {}
    for suffix in ("", "-wal", "-shm"):
        f = Path(f"{path}{suffix}")
        out[suffix] = hashlib.sha256(f.read_bytes()).hexdigest() if f.exists() else None
    return out


@pytest.fixture
def browser(database_settings: Settings) -> Iterator[GraphBrowser]:
    """The view's reads over the seeded database: SQLite, or in a test marked ``both_backends``
    also PostgreSQL."""
    seed_database(database_settings)
    b = GraphBrowser.open(database_settings)
    yield b
    b.close()


@pytest.fixture
def client(browser: GraphBrowser) -> Iterator[TestClient]:
    app = build_view_app(browser, allowed_hosts=HOSTS, allowed_origins=ORIGINS)
    with TestClient(app, base_url="http://127.0.0.1:8123") as c:
        yield c


# -- the reads ------------------------------------------------------------------------------------


@pytest.mark.both_backends
def test_search_points_at_the_matching_observation(client: TestClient) -> None:
    data = client.get("/api/search", params={"q": "GREEN tea"}).json()
    assert data["mode"] == "substring" and data["more"] is False
    (hit,) = data["results"]
    assert (hit["name"], hit["entityType"], hit["field"], hit["observations"]) == ("Alice", "person", "observation", 2)
    assert hit["snippet"] == [{"text": "likes ", "hit": False}, {"text": "green tea", "hit": True}]


@pytest.mark.both_backends
@pytest.mark.parametrize(("params", "names"), [
    ({"q": "tea likes", "mode": "words"}, ["Alice"]),
    ({"q": '"the cello" OR name:lyon', "mode": "fts"}, ["Bob", "Lyon"]),
    ({"q": "lyon"}, ["Alice", "Lyon"]),
])
def test_search_modes(client: TestClient, params: dict[str, str], names: list[str]) -> None:
    data = client.get("/api/search", params=params).json()
    assert sorted(h["name"] for h in data["results"]) == names


@pytest.mark.both_backends
def test_search_results_are_capped_with_more(client: TestClient) -> None:
    data = client.get("/api/search", params={"q": "spoke", "limit": "1000"}).json()
    assert len(data["results"]) == 200 and data["more"] is True


@pytest.mark.both_backends
@pytest.mark.parametrize(("params", "message"), [
    ({"q": "a AND (", "mode": "fts"}, "fts"),
    ({"q": "x", "mode": "regex"}, "unknown search mode 'regex'"),
    ({"q": "x", "limit": "many"}, "limit must be a whole number"),
])
def test_bad_search_is_a_400_with_the_reason(client: TestClient, params: dict[str, str], message: str) -> None:
    response = client.get("/api/search", params=params)
    assert response.status_code == 400 and message in response.json()["error"]


@pytest.mark.both_backends
def test_entity_page_is_bounded_and_carries_totals(client: TestClient) -> None:
    hub = client.get("/api/entity", params={"name": "Hub"}).json()
    assert (hub["observationsTotal"], len(hub["observations"])) == (250, 200)
    assert hub["observations"][0]["content"] == "fact 0" and hub["observations"][0]["createdAt"].endswith("Z")
    assert (hub["outgoingTotal"], len(hub["outgoing"]), hub["incomingTotal"]) == (300, 200, 0)
    alice = client.get("/api/entity", params={"name": "Alice"}).json()
    assert alice["outgoing"] == [{"from": "Alice", "to": "Bob", "relationType": "knows", "weight": 0.5},
                                 {"from": "Alice", "to": "Lyon", "relationType": "lives_in", "weight": 1.0}]
    assert alice["neighborTypes"] == {"Bob": "person", "Lyon": "city"}


@pytest.mark.both_backends
def test_entity_page_reads_on_from_an_offset_so_every_item_can_be_reached(client: TestClient) -> None:
    """Past the first 200 of a list nothing could be reached from the page (found by QA)."""
    first = client.get("/api/entity", params={"name": "Hub"}).json()
    rest = client.get("/api/entity", params={"name": "Hub", "offset": 200}).json()
    assert (first["offset"], rest["offset"]) == (0, 200)
    assert [o["content"] for o in first["observations"] + rest["observations"]] == [f"fact {i}" for i in range(250)]
    outgoing = first["outgoing"] + rest["outgoing"]
    assert len(outgoing) == 300 == len({(r["to"], r["relationType"]) for r in outgoing})
    assert (rest["observationsTotal"], rest["outgoingTotal"]) == (250, 300)
    beyond = client.get("/api/entity", params={"name": "Hub", "offset": 10**30}).json()
    assert beyond["observations"] == beyond["outgoing"] == [] and beyond["outgoingTotal"] == 300
    assert client.get("/api/entity", params={"name": "Hub", "offset": -5}).json()["offset"] == 0
    response = client.get("/api/entity", params={"name": "Hub", "offset": "x"})
    assert response.status_code == 400 and "offset must be a whole number" in response.json()["error"]


@pytest.mark.both_backends
def test_unknown_entity_is_a_404(client: TestClient) -> None:
    response = client.get("/api/entity", params={"name": "Nobody"})
    assert response.status_code == 404 and response.json() == {"error": "Entity with name Nobody not found"}


@pytest.mark.both_backends
def test_neighbourhood_is_capped_and_says_how_much_is_left_out(client: TestClient) -> None:
    area = client.get("/api/neighborhood", params={"name": "Hub", "hops": "2", "limit": "40"}).json()
    assert len(area["nodes"]) == 40 and area["truncated"] is True
    hub = area["nodes"][0]
    assert (hub["name"], hub["hops"], hub["degree"], hub["hidden"]) == ("Hub", 0, 300, 261)
    assert area["hidden"] == 261 and len(area["relations"]) == 39
    small = client.get("/api/neighborhood", params={"name": "Bob", "hops": "2"}).json()
    assert [n["name"] for n in small["nodes"]] == ["Bob", "Alice", "Lyon"] and small["truncated"] is False
    assert small["hidden"] == 0 and len(small["relations"]) == 2


@pytest.mark.both_backends
def test_overview_counts_types_hubs_and_latest_additions(client: TestClient) -> None:
    data = client.get("/api/overview").json()
    assert data["totals"] == {"entities": 304, "observations": 254, "relations": 302}
    assert data["entityTypes"][0] == {"type": "spoke", "count": 300}
    assert data["relationTypes"][0] == {"type": "has", "count": 300}
    assert data["mostConnected"][0] == {"name": "Hub", "entityType": "topic", "degree": 300}
    assert len(data["recent"]) == 15 and data["recent"][0]["kind"] == "relation"


# -- read-only, and live ----------------------------------------------------------------------------


def test_reads_never_write_and_find_writes_still_waiting_for_the_index(db_path: Path) -> None:
    seed(db_path)
    writer = Store.open(db_path)  # stays open, like a running server
    writer.run_write(lambda c: graph.create_entities(c, [Entity("Fresh", "note", ["waiting for the index"])]))
    assert writer.run_read(lambda c: c.execute("SELECT count(*) FROM search_pending").fetchone()[0]) > 0
    before = files_digest(db_path)
    browser = GraphBrowser.open(Settings.load(file_path=db_path))
    try:
        for mode in MODES:
            assert [h.name for h in browser.search("waiting", mode).hits] == ["Fresh"]
        browser.entity("Fresh")
        browser.neighborhood("Fresh", 2)
        browser.overview()
    finally:
        browser.close()
    assert files_digest(db_path) == before   # not even the index caught up
    assert writer.run_read(lambda c: c.execute("SELECT count(*) FROM search_pending").fetchone()[0]) > 0
    writer.close()


def test_browser_sees_writes_made_after_it_opened_a_closed_database(db_path: Path) -> None:
    seed(db_path)   # closed: no -shm, so the browser reads it immutable
    browser = GraphBrowser.open(Settings.load(file_path=db_path))
    try:
        assert browser.overview().totals["entities"] == 304
        writer = Store.open(db_path)
        writer.run_write(lambda c: graph.create_entities(c, [Entity("Later", "note", ["written later"])]))
        assert [h.name for h in browser.search("written later").hits] == ["Later"]
        first = browser.overview()
        assert first.recent[0].entity == "Later"   # the latest additions are read for each page
        assert first.stale or first.totals["entities"] == 305   # the counts follow in the background
        assert browser.overview(fresh=True).totals["entities"] == 305
        writer.close()
        assert browser.entity("Later") is not None
    finally:
        browser.close()


# -- the guard ------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/", "/api/overview", "/api/search?q=x", "/api/entity?name=Alice",
                                  "/api/neighborhood?name=Alice", "/static/view.js", "/nothing"])
@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "PROPFIND"])
def test_no_method_but_get_is_answered(client: TestClient, db_path: Path, method: str, path: str) -> None:
    response = client.request(method, path, content=b'{"entities": []}')
    assert response.status_code == 405 and response.headers["allow"] == "GET, HEAD"
    assert "content-security-policy" in response.headers


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8123", "127.0.0.1.evil.example:8123",
                                  "localhost:80x", ""])
def test_foreign_host_is_refused(client: TestClient, host: str) -> None:
    response = client.get("/api/overview", headers={"host": host})
    assert response.status_code == 421 and "Host" in response.text


def test_foreign_origin_is_refused(client: TestClient) -> None:
    assert client.get("/api/overview", headers={"origin": "http://evil.example"}).status_code == 403
    assert client.get("/api/overview", headers={"origin": "http://127.0.0.1:8123"}).status_code == 200


def test_every_answer_carries_a_strict_content_security_policy(client: TestClient) -> None:
    for path in ("/", "/api/overview", "/static/view.js", "/static/cytoscape.min.js"):
        response = client.get(path)
        assert response.status_code == 200
        csp = response.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe" not in csp and "default-src 'none'" in csp
        assert response.headers["x-content-type-options"] == "nosniff"


def test_page_has_no_inline_script_or_style(client: TestClient) -> None:
    html = client.get("/").text
    assert re.findall(r"<script[^>]*>", html) == ['<script src="static/cytoscape.min.js" defer>',
                                                   '<script src="static/view.js" defer>']
    assert "</script>" in html and not re.search(r"<script[^>]*>[^<]", html)
    assert "<style" not in html and " style=" not in html and "on" + "click" not in html


def test_page_script_never_writes_html_from_data(client: TestClient) -> None:
    script = client.get("/static/view.js").text
    assert not re.search(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function", script)


def test_vendored_graph_library_ships_with_its_license(client: TestClient) -> None:
    assert client.get("/static/cytoscape.LICENSE.txt").text.startswith("Copyright (c) 2016-2026, The Cytoscape")
    assert "The Cytoscape Consortium" in client.get("/static/cytoscape.min.js").text[:200]


# -- the command ----------------------------------------------------------------------------------


def test_view_command_serves_loopback_until_interrupted(db_path: Path) -> None:
    seed(db_path)
    proc = subprocess.Popen([str(SCRIPT), "view", "--database", str(db_path), "--no-browser"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert match, line
        port = int(match.group(1))
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/api/entity?name=Alice")
        response = conn.getresponse()
        assert response.status == 200 and b'"entityType":"person"' in response.read()
        conn.request("GET", "/api/overview", headers={"Host": "attacker.example"})
        response = conn.getresponse()
        assert response.status == 421
        response.read()
        conn.close()
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=15)
    assert code == 0


def test_view_of_a_missing_database_is_refused_without_creating_it(tmp_path: Path) -> None:
    missing = tmp_path / "none.db"
    result = subprocess.run([str(SCRIPT), "view", "--database", str(missing), "--no-browser"],
                            capture_output=True, text=True, timeout=30, env={**os.environ, "MEMORY_LOG_LEVEL": "error"})
    assert result.returncode == 1 and "graph-memory: error:" in result.stderr
    assert not missing.exists() and list(tmp_path.iterdir()) == []


def test_view_of_an_empty_file_says_it_holds_no_memory_yet(tmp_path: Path) -> None:
    """A 0-byte database started a view whose every page answered 503 (found by QA)."""
    empty = tmp_path / "empty.db"
    empty.touch()
    result = subprocess.run([str(SCRIPT), "view", "--database", str(empty), "--no-browser"],
                            capture_output=True, text=True, timeout=30, env={**os.environ, "MEMORY_LOG_LEVEL": "error"})
    assert result.returncode == 1 and result.stdout == ""
    assert f"the database {empty} holds no memory yet" in result.stderr and "migrate --database" in result.stderr
    assert empty.read_bytes() == b"" and list(tmp_path.iterdir()) == [empty]



# -- under the streamable-HTTP server (MEMORY_HTTP_VIEW_PATH) -------------------------------------


def test_http_server_serves_no_view_unless_asked(db_path: Path) -> None:
    from test_http import running

    seed(db_path)
    with running(db_path) as srv:
        assert httpx2.get(f"{srv.url}/view/").status_code == 404


def test_http_server_serves_the_view_under_its_path_read_only(db_path: Path) -> None:
    from test_http import running

    seed(db_path)
    with running(db_path, http_view_path="/memory/view/") as srv, httpx2.Client(base_url=srv.url) as http:
        redirect = http.get("/memory/view")
        assert redirect.status_code == 307 and redirect.headers["location"].endswith("/memory/view/")
        page = http.get("/memory/view/")
        assert page.status_code == 200 and 'src="static/view.js"' in page.text
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert http.get("/memory/view/static/view.js").status_code == 200
        data = http.get("/memory/view/api/search", params={"q": "green tea"}).json()
        assert [h["name"] for h in data["results"]] == ["Alice"]
        assert http.post("/memory/view/api/search", json={}).status_code == 405
        assert http.delete("/memory/view/api/entity", params={"name": "Alice"}).status_code == 405
        assert http.get("/memory/view/api/overview", headers={"host": "evil.example"}).status_code == 421
        assert http.get("/memory/view/api/overview", headers={"origin": "http://evil.example"}).status_code == 403
        assert http.get("/healthz").status_code == 200   # the rest of the server is as it was


def test_http_view_needs_the_bearer_token_when_one_is_set(db_path: Path) -> None:
    from test_http import TOKEN, running

    seed(db_path)
    with running(db_path, http_token=TOKEN, http_view_path="/view") as srv, httpx2.Client(base_url=srv.url) as http:
        assert http.get("/view/").status_code == 401
        assert http.get("/view/api/overview").status_code == 401
        authorized = http.get("/view/api/entity", params={"name": "Alice"},
                              headers={"authorization": f"Bearer {TOKEN}"})
        assert authorized.status_code == 200 and authorized.json()["entityType"] == "person"


@pytest.mark.parametrize(("value", "problem"), [
    ("/mcp", "taken by the MCP server"), ("/healthz/", "taken by the MCP server"), ("view", "not a URL path"),
    ("/", "not a URL path"), ("/a b", "not a URL path"), ("/mcp/view", "taken by the MCP server"),
])
def test_view_path_setting_is_checked(monkeypatch: pytest.MonkeyPatch, value: str, problem: str) -> None:
    monkeypatch.setenv("MEMORY_HTTP_VIEW_PATH", value)
    with pytest.raises(SettingsError, match="MEMORY_HTTP_VIEW_PATH") as info:
        Settings.load()
    assert problem in str(info.value)


def test_view_path_setting_drops_a_trailing_slash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORY_HTTP_VIEW_PATH", "/memory/view/")
    assert Settings.load().http_view_path == "/memory/view"


# -- every read of a page is an indexed, bounded query ---------------------------------------------


def test_page_reads_use_indexes_not_table_scans(db_path: Path) -> None:
    """Every statement behind the entity page, the neighbourhood, the latest additions and a search
    page finds its rows through an index (or reads a rowid range backwards under a LIMIT): none
    scans a graph table, so their cost does not grow with the graph."""
    seed(db_path)
    store = Store.open_readonly(db_path)
    statements: list[tuple[str, Any]] = []

    def trace(_cursor: Any, sql: str, bindings: Any) -> bool:
        if not sql.lstrip().upper().startswith(("EXPLAIN", "BEGIN", "COMMIT", "PRAGMA")):
            statements.append((sql, bindings))
        return True

    try:
        from graph_memory.db import explore, search

        def reads(conn: Any) -> None:
            conn.exec_trace = trace
            explore.entity_page(conn, "Hub", 200)
            explore.neighborhood(conn, ["Hub", "Alice"], 2, 40)
            explore.recent_changes(conn, 15)
            search.search(conn, "green tea", "substring", 51, related=False)
            conn.exec_trace = None
            for sql, bindings in statements:
                plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, bindings or ())]
                for step in plan:
                    scanned = re.match(r"SCAN (entities|observations|relations|entity_search)\b", step)
                    backwards = "ORDER BY id DESC LIMIT" in sql   # the latest rows, LIMIT-bounded
                    assert not scanned or backwards, f"{step} in {sql}"

        store.run_read(reads)
    finally:
        store.close()
    assert len(statements) >= 10
