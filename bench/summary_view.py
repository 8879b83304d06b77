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

from graph_memory.db.backend import open_backend
from graph_memory.mcp.jsontext import dumps_indent2
from graph_memory.service import Limits, MemoryService
from graph_memory.settings import Settings

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
    """Import ``jsonl`` into a new ``database`` (``graph-memory import``, as a user would) and
    report both views' sizes as a table row."""
    from bench.run import run_import

    run_import(jsonl, database)
    settings = Settings(file_path=database, max_reply_bytes=0)
    backend = open_backend(settings, "migrate")
    try:
        service = MemoryService(backend, Limits.from_settings(settings))
        graph = service.read_graph()
        return _report(f"{label} ({len(graph.entities):,} entities, {len(graph.relations):,} relations)",
                       *sizes(service))
    finally:
        backend.close()


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
