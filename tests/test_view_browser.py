"""``graph-memory view`` in a real browser: headless Chromium (Debian's ``chromium`` package)
driven by Playwright, against a real ``graph-memory view`` process on a real database: SQLite,
and for the tests marked ``both_backends`` a PostgreSQL database of the session's cluster too.

Chromium comes from the system (``/usr/bin/chromium``), never from ``playwright install`` (its
downloads fail on closed networks). When it is missing and we are root on a machine with apt-get,
the session fixture installs it, as ``.ci/docker-setup.sh`` provides Docker. Without it the tests
skip with the reason, except under CI (``CI=true``), where they fail: CI must run them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from graph_memory.models import Entity, Relation
from graph_memory.service import MemoryService
from graph_memory.settings import Settings

from helpers import install_debian_package

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"]
SCRIPT = Path(sys.executable).with_name("graph-memory")
HOSTILE_NAME = '<img src=x onerror="window.__pwned=1">'
HOSTILE_OBSERVATIONS = ["<script>window.__pwned=2</script>", "quotes \" ' & <b>bold</b> `tick` ${x}",
                        "javascript:window.__pwned=3"]
URL_NAME = "A&B #1 + 50% ?x=/y z"
# Records every Content-Security-Policy violation the page causes (injected by the browser driver,
# which CSP does not govern).
CSP_PROBE = ("window.__csp = []; document.addEventListener('securitypolicyviolation', "
             "(e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));")


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"browser tests must run in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def chromium_path() -> Path:
    """Debian's Chromium, installed when missing (see the module docstring)."""
    if not CHROMIUM.exists() and (problem := install_debian_package("chromium")) is not None:
        _unavailable(problem)
    return CHROMIUM


# Module scope: Playwright's sync API runs an event loop in this thread while it is started, and
# the async tests of later modules need the thread's loop free again.
@pytest.fixture(scope="module")
def chromium(chromium_path: Path) -> Iterator[Browser]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("Playwright for Python is missing: pip install -e '.[test]'")
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=str(chromium_path), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def seed(memory: MemoryService) -> None:
    memory.create_entities([
        Entity("Alice", "person", ["likes green tea", "lives in Lyon"]),
        Entity("Bob", "person", ["plays the cello"]),
        Entity("Lyon", "city", ["in France"]),
        Entity("Cleo", "person", ["met Bob at the conservatory"]),
        Entity(HOSTILE_NAME, "<i>type</i>", HOSTILE_OBSERVATIONS),
        Entity(URL_NAME, "odd", ["a name full of URL syntax"]),
    ])
    memory.create_relations([
        Relation("Alice", "Bob", "knows", 0.75), Relation("Alice", "Lyon", "lives_in"),
        Relation("Cleo", "Bob", "knows"), Relation(HOSTILE_NAME, "Alice", "<script>alert(4)</script>"),
        Relation(URL_NAME, "Cleo", "knows")])


class ViewProcess:
    """A running ``graph-memory view --no-browser`` on the database of ``settings`` (a SQLite file,
    or ``MEMORY_DATABASE_URL``) and its URL."""

    def __init__(self, settings: Settings) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
        if settings.database_url is not None:
            env["MEMORY_DATABASE_URL"] = settings.database_url.get_secret_value()
            where = []
        else:
            where = ["--database", str(settings.file_path)]
        self.proc = subprocess.Popen([str(SCRIPT), "view", *where, "--no-browser"], env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        self.line = line
        match = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
        if not match:
            self.stop()
            raise AssertionError(f"no URL in {line!r}")
        self.url = match.group(1)

    def stop(self) -> None:
        self.proc.terminate()
        assert self.proc.wait(timeout=15) == 0


@pytest.fixture
def view(memory: MemoryService, database_settings: Settings) -> Iterator[ViewProcess]:
    """The view on the seeded database of ``backend_kind`` (both backends where a test is marked
    ``both_backends``)."""
    seed(memory)
    process = ViewProcess(database_settings)
    yield process
    process.stop()


@pytest.fixture
def page(chromium: Browser) -> Iterator[Page]:
    context = chromium.new_context(viewport={"width": 1280, "height": 800})
    context.add_init_script(CSP_PROBE)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    # (a 400 or 404 the page shows as a message is logged by Chromium too: not an error of the page)
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" and not msg.text.startswith(
        "Failed to load resource: the server responded with a status of 4") else None)
    yield page
    violations = page.evaluate("window.__csp")
    context.close()
    assert violations == [] and errors == []   # the page runs under its strict CSP without a complaint


def wait_until(page: Page, expression: str, timeout_s: float = 10) -> None:
    """Wait until ``expression`` is true in the page. Not ``page.wait_for_function``: it polls with
    ``eval`` inside the page, which the page's CSP refuses (as it should)."""
    deadline = time.monotonic() + timeout_s
    while not page.evaluate(f"!!({expression})"):
        if time.monotonic() > deadline:
            raise AssertionError(f"still false after {timeout_s} s: {expression}")
        page.wait_for_timeout(50)


def entity_shown(name: str) -> str:
    """An expression true once the entity page of ``name`` is shown."""
    heading = "document.querySelector('#entity-name')"
    return f"{heading} !== null && {heading}.firstChild.textContent === {json.dumps(name)}"


def graph_nodes(page: Page) -> list[str]:
    wait_until(page, "window.graphMemoryView && window.graphMemoryView.cy")
    names: list[str] = page.evaluate("window.graphMemoryView.cy.nodes().map((n) => n.data('name'))")
    return sorted(names)


@pytest.mark.both_backends
def test_search_lists_results_with_the_hit_highlighted(view: ViewProcess, page: Page) -> None:
    page.goto(view.url)
    page.wait_for_selector("#totals")
    page.fill("#search-input", "GREEN tea")
    page.press("#search-input", "Enter")
    page.wait_for_selector("#results li")
    assert page.locator("#results li a").all_inner_texts() == ["Alice"]
    assert page.locator("#results li mark").all_inner_texts() == ["green tea"]
    page.select_option("#search-mode", "fts")
    page.fill("#search-input", '"the cello" OR conservatory')
    page.press("#search-input", "Enter")
    wait_until(page, "document.querySelectorAll('#results li').length === 2")
    assert sorted(page.locator("#results li a").all_inner_texts()) == ["Bob", "Cleo"]


@pytest.mark.both_backends
def test_bad_fts_query_shows_the_reason(view: ViewProcess, page: Page) -> None:
    page.goto(view.url + "#/search?q=a%20AND%20(&mode=fts")
    page.wait_for_selector(".error")
    assert "fts" in page.inner_text(".error")


@pytest.mark.both_backends
def test_open_an_entity_and_follow_a_neighbour(view: ViewProcess, page: Page) -> None:
    page.goto(view.url + "#/search?q=alice")
    page.click("#results li a")
    page.wait_for_selector("#entity-name")
    assert page.inner_text("#entity-name").startswith("Alice")
    assert page.locator("#observations li").count() == 2
    out_rows = page.evaluate("[...document.querySelectorAll('table.relations-out tbody tr')]"
                             ".map((tr) => [...tr.querySelectorAll('td, a, .type')].map((c) => c.textContent))")
    # cells: relation type, the other end (its link and type badge), the weight
    assert out_rows == [["knows", "Bobperson", "Bob", "person", "0.75"],
                        ["lives_in", "Lyoncity", "Lyon", "city", "1.00"]]
    page.locator("table.relations-out a", has_text="Bob").click()
    wait_until(page, entity_shown("Bob"))
    assert page.locator("table.relations-in a").all_inner_texts() == ["Alice", "Cleo"]


@pytest.mark.both_backends
def test_graph_canvas_draws_the_neighbourhood_and_a_click_navigates(view: ViewProcess, page: Page) -> None:
    page.goto(view.url + "#/entity?name=Bob")
    assert graph_nodes(page) == ["Alice", "Bob", "Cleo"]
    assert page.locator("#graph canvas").count() >= 1
    page.click("text=2 hops")
    wait_until(page, "location.hash.endsWith('hops=2') && window.graphMemoryView.cy "
                     "&& window.graphMemoryView.cy.nodes().length === 6")
    assert graph_nodes(page) == sorted(["Alice", "Bob", "Cleo", "Lyon", HOSTILE_NAME, URL_NAME])
    # a real click on the node drawn for Lyon opens its page
    x, y = page.evaluate("""() => {
        const cy = window.graphMemoryView.cy, box = cy.container().getBoundingClientRect();
        const p = cy.getElementById('n:Lyon').renderedPosition();
        return [box.left + p.x, box.top + p.y];
    }""")
    page.mouse.click(x, y)
    wait_until(page, entity_shown("Lyon"))


@pytest.mark.both_backends
def test_hostile_stored_strings_render_as_text_and_run_nothing(view: ViewProcess, page: Page) -> None:
    page.goto(view.url + "#/search?q=pwned")
    page.wait_for_selector("#results li")
    assert page.locator("#results li a").all_text_contents() == [HOSTILE_NAME]
    page.click("#results li a")
    page.wait_for_selector("#observations li")
    assert page.inner_text("#entity-name").startswith(HOSTILE_NAME)
    shown = page.evaluate("[...document.querySelectorAll('#observations li')].map((li) => li.firstChild.textContent)")
    assert shown == HOSTILE_OBSERVATIONS
    assert page.locator("table.relations-out td").first.inner_text() == "<script>alert(4)</script>"
    assert HOSTILE_NAME in graph_nodes(page)
    page.goto(view.url)   # the overview lists it among the latest additions too
    page.wait_for_selector("#recent li")
    assert page.evaluate("window.__pwned") is None
    assert page.locator("main img, main script, main i").count() == 0


@pytest.mark.both_backends
def test_the_start_line_names_the_database_it_shows(view: ViewProcess, database_settings: Settings) -> None:
    """On PostgreSQL it named a SQLite file that was not used (found by QA); the password stays masked."""
    assert view.line.startswith(f"graph-memory view of {database_settings.database_label}: http://"), view.line
    assert database_settings.database_url is None or "postgresql://" in view.line
    import urllib.request

    with urllib.request.urlopen(view.url, timeout=10) as answer:   # serving (and so stopped cleanly)
        assert answer.status == 200


RLO_NAME = "\u202eyrallih"   # shows as "hillary", and would reverse what follows it unless isolated


@pytest.mark.both_backends
def test_bidi_controls_and_prototype_names_stay_in_their_place(view: ViewProcess, page: Page,
                                                                memory: MemoryService) -> None:
    """An unclosed right-to-left override reversed the text after the name (dates, counts, other
    names); a relation to a missing entity named "constructor" showed a link and a badge reading
    "function Object() { [native code] }" (both found by QA)."""
    from graph_memory.importer import load_graph
    from graph_memory.legacy import LegacyGraph

    memory.create_entities([Entity(RLO_NAME, "person", ["spoofs"])])
    memory.create_relations([Relation(RLO_NAME, "Alice", "trusts")])
    load_graph(memory.backend, LegacyGraph([], [Relation("Alice", "constructor", "fears"),
                                                Relation("Alice", "__proto__", "fears")]), source="test")
    page.goto(view.url + "#/entity?name=Alice")
    page.wait_for_selector("table.relations-in td")
    isolated = page.evaluate("[...document.querySelectorAll('main bdi')].map((b) => b.textContent)")
    assert RLO_NAME in isolated and all(name == RLO_NAME for name in isolated)
    assert RLO_NAME in page.evaluate("[...document.querySelectorAll('table.relations-in a')].map((a) => a.textContent)")
    rows = page.evaluate("[...document.querySelectorAll('table.relations-out tbody tr')]"
                         ".map((tr) => [tr.cells[1].textContent, tr.cells[1].querySelectorAll('a, .type').length])")
    assert ["constructor", 0] in rows and ["__proto__", 0] in rows, rows


@pytest.mark.both_backends
def test_an_entity_page_pages_through_long_lists(view: ViewProcess, page: Page, memory: MemoryService) -> None:
    """Past the first 200 items of a list nothing could be reached from the page (found by QA)."""
    memory.create_entities([Entity("Hub", "thing", [f"fact {i:03d}" for i in range(230)])])
    page.goto(view.url + "#/entity?name=Hub")
    page.wait_for_selector("#observations li")
    assert page.locator("#observations li").count() == 200
    assert "1–200 of 230 shown" in page.inner_text("main")
    page.locator("a[rel=next]").first.click()
    wait_until(page, "location.hash.endsWith('from=200') "
                     "&& document.querySelectorAll('#observations li').length === 30")
    assert page.evaluate("document.querySelector('#observations li').firstChild.textContent") == "fact 200"
    assert page.locator("a[rel=next]").count() == 0 and "201–230 of 230 shown" in page.inner_text("main")
    page.locator("a[rel=prev]").first.click()
    wait_until(page, "document.querySelectorAll('#observations li').length === 200")


def test_a_search_with_more_than_50_results_offers_up_to_200(view: ViewProcess, page: Page,
                                                            memory: MemoryService) -> None:
    memory.create_entities([Entity(f"Quokka {i:02d}", "animal", ["seen on Rottnest"]) for i in range(60)])
    page.goto(view.url + "#/search?q=quokka")
    wait_until(page, "document.querySelectorAll('#results li').length === 50")
    assert page.inner_text("main h1").startswith("50+ results")
    page.click("#more-results")
    wait_until(page, "document.querySelectorAll('#results li').length === 60")
    assert page.locator("#more-results").count() == 0 and page.inner_text("main h1").startswith("60 results")


_RPC_LOCK = threading.Lock()


@pytest.mark.both_backends
def test_names_full_of_url_syntax_navigate_both_ways(view: ViewProcess, page: Page) -> None:
    page.goto(view.url)
    page.fill("#search-input", "50% ?x=/y")
    page.press("#search-input", "Enter")
    page.wait_for_selector("#results li")
    page.click("#results li a")
    wait_until(page, entity_shown(URL_NAME))
    page.locator("table.relations-out a", has_text="Cleo").click()
    wait_until(page, entity_shown("Cleo"))
    page.locator("table.relations-in a", has_text="A&B").click()
    wait_until(page, entity_shown(URL_NAME))


def _rpc(server: subprocess.Popen[str], message: dict[str, Any]) -> dict[str, Any] | None:
    """Send one JSON-RPC message over the server's stdin; for a request, its reply (one caller at a time)."""
    assert server.stdin is not None and server.stdout is not None
    with _RPC_LOCK:
        server.stdin.write(json.dumps(message) + "\n")
        server.stdin.flush()
        if "id" not in message:
            return None
        while True:
            reply: dict[str, Any] = json.loads(server.stdout.readline())
            if reply.get("id") == message["id"]:
                return reply


def test_view_follows_a_server_process_writing_to_the_database(view: ViewProcess, page: Page, db_path: Path) -> None:
    server = subprocess.Popen([str(SCRIPT), "serve", "--database", str(db_path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    ids = iter(range(1, 10_000))

    def create(name: str) -> None:
        reply = _rpc(server, {"jsonrpc": "2.0", "id": next(ids), "method": "tools/call", "params": {
            "name": "create_entities", "arguments": {"entities": [
                {"name": name, "entityType": "note", "observations": [f"live write {name}"]}]}}})
        assert reply is not None and not reply["result"].get("isError"), reply

    try:
        _rpc(server, {"jsonrpc": "2.0", "id": next(ids), "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}})
        _rpc(server, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        create("Live 0")
        page.goto(view.url + "#/search?q=live%20write")
        page.wait_for_selector("#results li")
        assert page.locator("#results li a").all_inner_texts() == ["Live 0"]
        # writes keep landing while the page is used: each page shows every write committed before it
        burst = threading.Thread(target=lambda: [create(f"Burst {i}") for i in range(40)])
        burst.start()
        for i in range(1, 6):
            create(f"Live {i}")
            page.goto(view.url + f"#/entity?name=Live%20{i}")
            wait_until(page, entity_shown(f"Live {i}"))
            page.goto(view.url + f"#/search?q=live%20write%20live&mode=words&n={i}")
            wait_until(page, f"document.querySelectorAll('#results li').length >= {i + 1}")
        burst.join()
        page.goto(view.url + "#/search?q=live%20write%20burst&n=last")
        wait_until(page, "document.querySelectorAll('#results li').length === 40")
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=30)
