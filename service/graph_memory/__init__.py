"""graph-memory: knowledge-graph memory for AI assistants over MCP, on SQLite + FTS5.

A drop-in replacement for the reference server ``@modelcontextprotocol/server-memory``.
Layers, top to bottom (docs/architecture.md): the edges ``cli`` and ``mcp`` (server, stdio,
http, and the tool adapters ``tools``/``typed``); ``service`` (``MemoryService``, one method per
operation); ``importer`` (legacy import, export, import records) over ``legacy`` (the reference
server's JSONL, pure); the storage layer ``db`` (the ``backend`` protocols, store, migrations,
search index, graph and search SQL, backup), the only code that imports apsw or runs SQL on the
graph. ``settings`` is the only reader of the environment; ``models`` and ``errors``
are plain values and the one exception tree.
"""

# The one place the version is written: pyproject.toml reads it from here ([tool.hatch.version]),
# so the server's first reply does not import importlib.metadata (~50 ms of every start).
__version__ = "0.1.0"


def package_version() -> str:
    """The version of graph-memory (the installed distribution's, which is built from this one)."""
    return __version__
