"""The ``graph-memory`` command: serve the MCP server, and the data tools around it.

Every deliberate failure (:class:`~graph_memory.errors.GraphError`, invalid settings) becomes
one message on stderr and exit status 1 here; nothing else prints tracebacks at users. Heavy
imports (the mcp SDK, uvicorn) happen only in the subcommands that need them, so the data tools
start fast. Stdout carries only the protocol (``serve`` on stdio) or the command's output.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from graph_memory.errors import GraphError, LegacyFormatError

if TYPE_CHECKING:
    from graph_memory.settings import Settings

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2


def _settings(args: argparse.Namespace) -> Settings:
    from pydantic import ValidationError

    from graph_memory.settings import Settings

    overrides = {k: v for k, v in {
        "transport": getattr(args, "transport", None),
        "http_host": getattr(args, "host", None),
        "http_port": getattr(args, "port", None),
        "file_path": getattr(args, "database", None),
    }.items() if v is not None}
    try:
        settings = Settings(**overrides)
    except ValidationError as exc:
        problems = "; ".join(f"MEMORY_{'_'.join(str(p) for p in e['loc']).upper()}: {e['msg']}"
                             for e in exc.errors())
        raise GraphError(f"invalid settings: {problems}") from None
    from graph_memory.logs import configure_logging

    configure_logging(settings.log_level, settings.effective_log_format)
    return settings


def cmd_serve(args: argparse.Namespace) -> int:
    """Open the database (migrating it, importing a legacy file on first start), then serve MCP."""
    settings = _settings(args)
    from graph_memory.importer import first_start_import
    from graph_memory.logs import get_logger
    from graph_memory.store import Store

    log = get_logger("graph_memory.cli")
    store = Store.open(settings.database_path, busy_timeout_ms=settings.busy_timeout_ms)
    try:
        try:
            first_start_import(store, settings.legacy_candidates)
        except LegacyFormatError as exc:
            raise GraphError(
                f"{exc}. The database {store.path} was left empty and the legacy file untouched. "
                f"Fix that line, or import what can be read with: graph-memory import --skip-invalid "
                f"{exc.path or 'FILE'}"
            ) from exc
        from graph_memory.server import build_server
        from graph_memory.tools import Limits, Memory

        server = build_server(Memory(store, Limits.from_settings(settings)))
        log.info("server_starting", transport=settings.transport, database=str(store.path))
        if settings.transport == "http":
            from graph_memory.http import serve_http

            serve_http(server, store, settings)
        else:
            import anyio

            anyio.run(_serve_stdio, server)
    finally:
        store.close()
        log.info("server_stopped", database=str(store.path))
    return EXIT_OK


async def _serve_stdio(server: object) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())  # type: ignore[attr-defined]


def cmd_healthcheck(args: argparse.Namespace) -> int:
    """Exit 0 when the database opens and has every migration applied, else 1 with the reason."""
    settings = _settings(args)
    from graph_memory import migrations
    from graph_memory.store import Store

    store = Store.open(settings.database_path, busy_timeout_ms=settings.busy_timeout_ms, migrate=False)
    try:
        state = migrations.status(store.conn, str(store.path))
    finally:
        store.close()
    if state.pending:
        print(f"unhealthy: {len(state.pending)} migration(s) pending on {store.path}", file=sys.stderr)
        return EXIT_ERROR
    print(f"ok: {store.path} at schema version {state.version}")
    return EXIT_OK


def cmd_import(args: argparse.Namespace) -> int:
    """Merge an upstream JSONL/JSON file into the database."""
    settings = _settings(args)
    import json

    from graph_memory.importer import import_file
    from graph_memory.store import Store

    store = Store.open(settings.database_path, busy_timeout_ms=settings.busy_timeout_ms)
    try:
        report = import_file(store, args.file, skip_invalid=args.skip_invalid, dry_run=args.dry_run)
    finally:
        store.close()
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
    else:
        verb = "would import" if report.dry_run else "imported"
        print(f"{verb} {args.file} into {store.path}: {report.entities_created} entities created, "
              f"{report.entities_merged} merged, {report.observations_added} observations added, "
              f"{report.relations_created} relations created, {report.relations_skipped} already present")
        for line, reason in report.invalid_lines:
            print(f"  skipped invalid line {line}: {reason}")
        for line, reason in report.skipped_lines:
            print(f"  skipped line {line}: {reason}")
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    """Write the graph in the reference server's JSONL format to a file or stdout."""
    settings = _settings(args)
    from graph_memory import graph
    from graph_memory.legacy import write_legacy
    from graph_memory.store import Store

    store = Store.open(settings.database_path, busy_timeout_ms=settings.busy_timeout_ms)
    try:
        snapshot = store.run_read(graph.read_graph)
    finally:
        store.close()
    if args.output in (None, "-"):
        write_legacy(snapshot.entities, snapshot.relations, sys.stdout)
    else:
        with open(args.output, "w", encoding="utf-8", newline="\n") as out:
            write_legacy(snapshot.entities, snapshot.relations, out)
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (subcommands: serve, import, export, healthcheck)."""
    from graph_memory import package_version

    parser = argparse.ArgumentParser(
        prog="graph-memory",
        description="Knowledge-graph memory for AI assistants over MCP (SQLite + FTS5). "
                    "Without a command, serves MCP on the transport MEMORY_TRANSPORT names (stdio).",
    )
    parser.add_argument("--version", action="version", version=f"graph-memory {package_version()}")
    parser.add_argument("--database", help="database file (overrides MEMORY_FILE_PATH)")
    parser.set_defaults(handler=cmd_serve)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    serve = sub.add_parser("serve", help="serve MCP (default command)")
    serve.add_argument("--transport", choices=["stdio", "http"], help="overrides MEMORY_TRANSPORT")
    serve.add_argument("--host", help="HTTP bind address (overrides MEMORY_HTTP_HOST)")
    serve.add_argument("--port", type=int, help="HTTP port (overrides MEMORY_HTTP_PORT)")
    serve.set_defaults(handler=cmd_serve)

    imp = sub.add_parser("import", help="merge a reference-server memory.jsonl/.json into the database")
    imp.add_argument("file", help="the legacy file (read only, never modified)")
    imp.add_argument("--skip-invalid", action="store_true", help="skip and list bad lines instead of refusing")
    imp.add_argument("--dry-run", action="store_true", help="report what would happen; write nothing")
    imp.add_argument("--json", action="store_true", help="print the report as JSON")
    imp.set_defaults(handler=cmd_import)

    exp = sub.add_parser("export", help="write the graph as reference-server JSONL")
    exp.add_argument("-o", "--output", help="output file (default: stdout)")
    exp.set_defaults(handler=cmd_export)

    health = sub.add_parser("healthcheck", help="exit 0 when the database opens and is fully migrated")
    health.set_defaults(handler=cmd_healthcheck)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``graph-memory`` console script. Returns the exit status."""
    args = build_parser().parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except GraphError as exc:
        print(f"graph-memory: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
