"""graph-memory: knowledge-graph memory for AI assistants over MCP, on SQLite + FTS5.

A drop-in replacement for the reference server ``@modelcontextprotocol/server-memory``.
Layers, each importing only those below it: ``cli`` → ``server``/``tools`` → ``graph`` →
``store`` → ``migrations``; ``legacy``/``importer`` read and write the reference server's
JSONL; ``settings`` is the only reader of the environment.
"""

from importlib.metadata import PackageNotFoundError, version


def package_version() -> str:
    """The installed distribution's version (``0+unknown`` when running from an uninstalled tree)."""
    try:
        return version("graph-memory")
    except PackageNotFoundError:
        return "0+unknown"
