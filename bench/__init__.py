"""Benchmarks of graph-memory against the reference server ``@modelcontextprotocol/server-memory``.

Run ``python -m bench --help``. Modules: ``datagen`` (deterministic unicode graphs in the legacy
JSONL format), ``servers`` (spawning both servers over MCP stdio), ``workload`` (the measured
calls), ``stats``, ``report`` (table, Markdown, plot) and ``run`` (the command). ``ab`` and ``replies`` compare
source trees side by side: point operations (``ab``), and the empty call, ``read_graph`` and peak
memory (``replies``, with ``--raw`` for the server's own time). ``cold_start`` times a stdio start
to its first reply beside the SDK's own import.
"""
