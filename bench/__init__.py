"""Benchmarks of graph-memory against the reference server ``@modelcontextprotocol/server-memory``.

Run ``python -m bench --help``. Modules: ``datagen`` (deterministic unicode graphs in the legacy
JSONL format), ``servers`` (spawning both servers over MCP stdio), ``workload`` (the measured
calls), ``stats``, ``report`` (table, Markdown, plot), ``run`` (the command), and
``pipe_stdio`` (an experiment: our server with stdio on asyncio pipes, measured beside the shipped one).
"""
