"""Make the screenshots of ``graph-memory view`` in docs/ (not a test; run it by hand):

    .venv/bin/python tests/view_screenshots.py

It builds a small demonstration memory in a temporary folder, serves it with ``graph-memory
view`` and photographs the overview, a search and an entity page in headless Chromium.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from graph_memory.db import graph
from graph_memory.db.store import Store
from graph_memory.models import Entity, Relation

DOCS = Path(__file__).resolve().parent.parent / "docs"
SCRIPT = Path(sys.executable).with_name("graph-memory")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]

ENTITIES = [
    Entity("Maya Okafor", "person", ["is the user", "prefers green tea to coffee", "climbs on Thursdays",
                                     "speaks Portuguese and Igbo", "moved to Lisbon in 2024"]),
    Entity("Tomás Ruiz", "person", ["Maya's climbing partner", "works as a nurse"]),
    Entity("Northwind Labs", "organization", ["Maya's employer", "builds weather sensors"]),
    Entity("Project Heron", "project", ["a low-power rain gauge", "deadline: end of March"]),
    Entity("Lisbon", "city", ["Maya lives in Alfama"]),
    Entity("Ana Costa", "person", ["leads Project Heron", "drinks green tea too"]),
    Entity("Bloco Climbing", "place", ["bouldering gym in Lisbon"]),
    Entity("Kai Schmidt", "person", ["Northwind's CTO"]),
    Entity("Rain gauge v2", "product", ["ships in April"]),
    Entity("Porto", "city", ["Maya's sister lives here"]),
    Entity("Inês Okafor", "person", ["Maya's sister", "a violinist"]),
    Entity("Lisbon Tea House", "place", ["Maya's favourite café"]),
]
RELATIONS = [
    Relation("Maya Okafor", "Northwind Labs", "works_at"), Relation("Maya Okafor", "Lisbon", "lives_in"),
    Relation("Maya Okafor", "Project Heron", "works_on", 0.8), Relation("Maya Okafor", "Tomás Ruiz", "climbs_with"),
    Relation("Maya Okafor", "Bloco Climbing", "member_of", 0.6), Relation("Ana Costa", "Project Heron", "leads"),
    Relation("Ana Costa", "Northwind Labs", "works_at"), Relation("Kai Schmidt", "Northwind Labs", "works_at"),
    Relation("Project Heron", "Rain gauge v2", "produces"), Relation("Bloco Climbing", "Lisbon", "located_in"),
    Relation("Inês Okafor", "Porto", "lives_in"), Relation("Maya Okafor", "Inês Okafor", "sister_of"),
    Relation("Maya Okafor", "Lisbon Tea House", "visits", 0.4), Relation("Lisbon Tea House", "Lisbon", "located_in"),
    Relation("Tomás Ruiz", "Bloco Climbing", "member_of"),
]


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "memory.db"
        store = Store.open(db)
        store.run_write(lambda c: graph.create_entities(c, ENTITIES))
        store.run_write(lambda c: graph.create_relations(c, RELATIONS))
        store.close()
        view = subprocess.Popen([str(SCRIPT), "view", "--database", str(db), "--no-browser"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            assert view.stdout is not None
            match = re.search(r"(http://\S+/)", view.stdout.readline())
            assert match
            url = match.group(1)
            with sync_playwright() as driver:
                browser = driver.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
                page = browser.new_page(viewport={"width": 1200, "height": 720})
                for name, hash_, ready in [("view-overview", "#/", "#recent li"),
                                           ("view-search", "#/search?q=green%20tea", "#results li"),
                                           ("view-entity", "#/entity?name=Maya%20Okafor&hops=2", "#graph canvas")]:
                    page.goto(url + hash_)
                    page.wait_for_selector(ready)
                    page.wait_for_timeout(800)  # the graph's layout settles
                    page.screenshot(path=str(DOCS / f"{name}.png"))
                browser.close()
        finally:
            view.terminate()
            view.wait(timeout=15)


if __name__ == "__main__":
    main()
