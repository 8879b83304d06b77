"""How much the summary view saves: ``read_graph`` text in the full and the summary view.

``python -m bench.summary_view [N]`` loads the reference server's real memory file
(``tests/data/upstream-memory.jsonl``, a copy of ``shared/data/upstream-memory.jsonl``) and a
generated graph of ``N`` entities (:mod:`bench.datagen`, default 1,000) into throwaway databases
and prints, for each, the size of ``read_graph``'s text item in both views: bytes, and tokens
estimated as bytes / 4 (no tokenizer is available offline here; the ratio is what matters).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from graph_memory.db.backend import SqliteBackend
from graph_memory.db.store import Store
from graph_memory.importer import load_graph, read_legacy_file
from graph_memory.mcp.jsontext import dumps_indent2
from graph_memory.service import MemoryService

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "tests" / "data" / "upstream-memory.jsonl"


def sizes(service: MemoryService) -> tuple[int, int]:
    """Bytes of read_graph's text in the full and the summary view."""
    result = service.read_graph()
    return (len(dumps_indent2(result.shaped("full")).encode()),
            len(dumps_indent2(result.shaped("summary")).encode()))


def _report(label: str, full: int, summary: int) -> str:
    return (f"| {label} | {full:,} B (~{full // 4:,} tokens) | {summary:,} B (~{summary // 4:,} tokens) | "
            f"{100 * (1 - summary / full):.0f} % |")


def measure(label: str, jsonl: Path, database: Path) -> str:
    """Import ``jsonl`` into a new ``database`` and report both views' sizes as a table row."""
    store = Store.open(database)
    try:
        _, legacy = read_legacy_file(str(jsonl), skip_invalid=False, database=database)
        load_graph(store, legacy, source=str(jsonl))
        return _report(f"{label} ({len(legacy.entities):,} entities, {len(legacy.relations):,} relations)",
                       *sizes(MemoryService(SqliteBackend(store))))
    finally:
        store.close()


def main(argv: list[str]) -> int:
    from bench.datagen import make_graph

    n = int(argv[0]) if argv else 1_000
    print("| graph | full view | summary view | saved |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        print(measure("reference sample", SAMPLE, Path(folder) / "sample.db"))
        generated = Path(folder) / "generated.jsonl"
        make_graph(n).write_jsonl(generated)
        print(measure("generated, 5 observations each", generated, Path(folder) / "generated.db"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
