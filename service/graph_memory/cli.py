"""The ``graph-memory`` command: serve the MCP server, and the data tools around it.

Every deliberate failure (:class:`~graph_memory.errors.GraphError`, invalid settings included)
becomes one message on stderr and exit status 1 in :func:`main`, the CLI's one mapping: the
domain raises errors that already say what to do, and no command catches one to reword it.
Nothing else prints tracebacks at users. Heavy
imports (the mcp SDK, uvicorn) happen only in the subcommands that need them, so the data tools
start fast. Stdout carries only the protocol (``serve`` on stdio) or the command's result; logs,
progress bars and errors go to stderr.
"""

from __future__ import annotations

import argparse
import errno
import json
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from graph_memory.errors import GraphError
from graph_memory.hints import graph_memory_command
from graph_memory.wording import plural

if TYPE_CHECKING:
    from graph_memory.db.backend import Backend
    from graph_memory.db.backup import GraphCounts
    from graph_memory.importer import ImportRecord, ImportReport
    from graph_memory.mcp.server import SdkServer, ServerHandle
    from graph_memory.mcp.tools import ToolSpec
    from graph_memory.settings import Settings

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_PENDING = 0, 1, 2, 3
# A progress bar appears only for work lasting longer than this (seconds), and only on a terminal.
PROGRESS_DELAY = 0.5
# The human import report lists at most this many skipped or invalid lines (--json lists all).
_LISTED_NAMES = 20
_LISTED_LINES = 50

EXIT_STATUS_HELP = """\
exit status:
  0  success (migrate: up to date, or the pending migrations were applied)
  1  refused or failed; the message on stderr says why and what to do
  2  usage error (unknown command or option)
  3  migrate --check: migrations are pending
  130, 143  interrupted (Ctrl-C) or stopped (SIGTERM); a data command leaves nothing half-done
"""


def _settings(args: argparse.Namespace) -> Settings:
    from graph_memory.settings import Settings

    overrides = {k: v for k, v in {
        "transport": getattr(args, "transport", None),
        "http_host": getattr(args, "host", None),
        "http_port": getattr(args, "port", None),
        "file_path": getattr(args, "database", None),
    }.items() if v is not None}
    settings = Settings.load(**overrides)
    from graph_memory.logs import configure_logging

    configure_logging(settings.log_level, settings.effective_log_format)
    args.resolved_settings = settings   # for main's error messages (_with_path_origin)
    if note := settings.relative_path_note(given_by := _path_given_by(args)):
        from graph_memory.logs import get_logger

        # The reference server resolved the same relative value against its own package folder.
        discover = graph_memory_command("import", "--discover", database=settings.database_path)
        hint = {"hint": f"the reference server resolves a relative MEMORY_FILE_PATH against its own package "
                        f"folder; {discover} finds the files it left there"}
        get_logger("graph_memory.cli").info("database_path_relative", database=str(settings.database_path),
                                            note=note, **(hint if given_by == "MEMORY_FILE_PATH" else {}))
    from graph_memory.db.backend import check_configured_paths

    check_configured_paths(settings)  # a folder, a FIFO… refused here
    return settings


def _path_given_by(args: argparse.Namespace) -> str:
    return "--database" if getattr(args, "database", None) is not None else "MEMORY_FILE_PATH"


def _with_path_origin(exc: GraphError, args: argparse.Namespace) -> str:
    """The error message, plus where the database path came from when it was given as a relative
    path and the message is about that path (the file, or its folder). The one place path errors
    of every command pass through."""
    import re

    message = str(exc)
    settings: Settings | None = getattr(args, "resolved_settings", None)
    note = settings and settings.relative_path_note(_path_given_by(args))
    if settings is None or not note:
        return message
    # A path counts when it is not just the start of a longer one (…/y, not …/y/other.jsonl).
    names = {str(settings.file_path), str(settings.database_path), str(settings.database_path.parent)}
    if any(re.search(re.escape(name) + r"(?![\\/\w.-])", message) for name in names):
        # On a line of its own: a message may end with a command to copy up to the end of its line.
        return f"{message}\ngraph-memory: note: {note}"
    return message


class _Bar:
    """A tqdm bar on stderr, silent when stderr is not a terminal (``disable=None``) or the work
    ends within :data:`PROGRESS_DELAY`. Serves as the importer's Progress and backup's callback."""

    def __init__(self, total: int | None, desc: str, unit: str) -> None:
        from tqdm import tqdm

        self.bar = tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, disable=None, delay=PROGRESS_DELAY,
                        leave=False, dynamic_ncols=True, unit_scale=True)

    def advance(self, items: int) -> None:
        self.bar.update(items)

    def phase(self, name: str) -> None:
        self.bar.set_description_str(name)

    def pages(self, done: int, total: int) -> None:
        self.bar.total = total
        self.bar.update(done - self.bar.n)

    def __enter__(self) -> _Bar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.close()


# glibc's mallopt parameter for the size from which every allocation gets its own mmap.
_M_MMAP_THRESHOLD = -3


def return_large_buffers_to_the_os() -> bool:
    """Have glibc's malloc serve every block of 128 KiB or more with its own mmap, given back to
    the OS when freed. By default glibc raises that threshold each time such a block is freed, so
    the buffers of one large reply (a search matching thousands of entities) stay in the heap and
    later replies add to them: with this, the server's peak RSS through the benchmark at 100k
    entities is 119 MiB instead of 138 (issue 6). Nothing changes outside glibc (musl, macOS,
    Windows).

    Returns:
        Whether the setting was applied.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        return bool(ctypes.CDLL("libc.so.6").mallopt(_M_MMAP_THRESHOLD, 128 * 1024))
    except (OSError, AttributeError):   # not glibc
        return False


def cmd_serve(args: argparse.Namespace) -> int:
    """Open the database (migrating it, importing a legacy file on first start), then serve MCP.

    A start refused on stdio for a client (stdin not a terminal) still serves the session, each
    call answered with why (:func:`_answer_with_refusal`), and then exits 1.
    """
    return_large_buffers_to_the_os()
    try:
        settings = _settings(args)
        server, backend, stop = _start_server(settings)
    except GraphError as exc:
        return _answer_with_refusal(exc, args)
    signalled = False
    try:
        if settings.transport == "http":
            from graph_memory.mcp.http import serve_http

            serve_http(server, backend, settings)
        else:
            signalled = _serve_stdio_session(server.server, stop, settings.max_reply_bytes)
    finally:
        stop()
    if signalled:   # what a service manager waits for: not the interpreter's ~160 ms teardown (QA)
        _exit_at_once(signal.SIGTERM, None)
    return EXIT_OK


def _start_server(settings: Settings) -> tuple[ServerHandle, Backend, Callable[[], None]]:
    """The MCP server over the database ``settings`` name, that database (open, migrated, a legacy
    file imported on first start), and the function that closes it.

    Raises:
        GraphError: the start is refused (an invalid schema file, a damaged or locked database, a
            bad legacy file…); nothing is left open.
    """
    from graph_memory.logs import get_logger
    from graph_memory.service import first_start, first_start_built, open_backend

    log = get_logger("graph_memory.cli")
    typed_tools: tuple[ToolSpec, ...] = ()
    inverses: dict[str, str] = {}
    if settings.schemas_dir is not None or settings.inverse_relations:   # else not imported (cold start)
        from graph_memory.mcp.typed import declared_inverses, load_typed_tools

        typed_tools = load_typed_tools(settings.schemas_dir)   # an invalid schema stops here, before the database
        inverses = declared_inverses(settings.schemas_dir, settings.inverse_relations)
    elif schemas := _schemas_beside(settings.file_path):
        # MemoryMesh keeps its schemas in schemas/ beside its memory file and always loads them;
        # here they need MEMORY_SCHEMAS_DIR (found by QA: the typed tools were simply missing).
        log.warning("schemas_dir_not_set", folder=str(schemas[0]), schema_files=schemas[1],
                    hint=f"set MEMORY_SCHEMAS_DIR={schemas[0]} to serve their typed tools (add_<type>, "
                         f"update_<type>, delete_<type>)")
    # Logged before anything can fail, so that every server_stopped follows its server_starting.
    log.info("server_starting", transport=settings.transport, backend=_backend_kind(settings),
             database=str(settings.database_label))
    try:
        # A new SQLite database with a legacy file to import is built beside its name first (a
        # bad legacy file stops the start here, before any database exists).
        built = first_start_built(settings, log)
        backend = open_backend(settings, "migrate")
    except GraphError as exc:  # for log collectors; main prints the message for people
        log.error("server_start_failed", database=str(settings.database_label), error=str(exc)[:500])
        raise

    def stop() -> None:
        # Leave the file with its search index up to date (a later search would catch up anyway).
        backend.catch_up_when_idle()
        backend.close()
        log.info("server_stopped", database=str(backend.path))

    try:
        first_start(backend, settings, log, lost_build=built == "lost")  # a bad legacy file stops the start here
        from graph_memory.mcp.server import build_server
        from graph_memory.service import Limits, MemoryService

        server = build_server(MemoryService(backend, Limits.from_settings(settings), inverses),
                              extra_tools=typed_tools, profile=settings.tools)
    except BaseException:
        stop()
        raise
    log.info("server_ready", transport=settings.transport, backend=backend.kind, database=str(backend.path))
    return server, backend, stop


def _serve_stdio_session(server: SdkServer, on_signal: Callable[[], None], max_reply_bytes: int,
                         exit_status: int = EXIT_OK) -> bool:
    """Serve ``server`` on stdin/stdout until the input ends or a signal stops it (:func:`_serve_stdio`);
    returns whether a signal did. A signal stopping it at once exits with ``exit_status``."""
    import anyio

    signalled = False
    try:
        signalled = anyio.run(_serve_stdio, server, on_signal, max_reply_bytes, exit_status,
                              backend_options=_loop_options())
    except* BrokenPipeError:
        # The client stopped reading stdout (it exited, or `… | head`): the session is over.
        # Every write it acknowledged is committed; stop as on end of input, without a traceback.
        from graph_memory.logs import get_logger

        get_logger("graph_memory.cli").info("client_gone", reason="stdout closed by the client")
    # Closing down: a further signal stops at once, as a second one does while serving (the
    # event loop gone, it met the default handler: exit 143, found by QA).
    _exit_at_further_signals(exit_status)
    return signalled


def _answer_with_refusal(exc: GraphError, args: argparse.Namespace) -> int:
    """A refused start (``exc``: a damaged, locked or unreachable database, an invalid setting or
    schema file, a bad legacy file). For an MCP client on stdio the message goes to stderr at
    once, then the session is served with every tool call and resource read answered with it —
    the reference server, opening its file on each call, answers such problems call by call, and
    a host told only "server disconnected" leaves the user to find its log. Exits 1 when the
    client ends the session.

    Raises:
        GraphError: ``exc`` again in HTTP mode (an orchestrator restarts the server and shows
            its log) and on a terminal (whoever ran the command reads stderr).
    """
    from graph_memory.settings import DEFAULT_MAX_REPLY_BYTES, StartFallback

    settings: Settings | None = getattr(args, "resolved_settings", None)
    transport: str
    if settings is not None:
        transport, profile, max_reply_bytes = settings.transport, settings.tools, settings.max_reply_bytes
    else:   # the settings are what was refused
        fallback = StartFallback.load(getattr(args, "transport", None))
        transport, profile, max_reply_bytes = fallback.transport, fallback.profile, DEFAULT_MAX_REPLY_BYTES
    # Only HTTP is served otherwise: an invalid MEMORY_TRANSPORT ("STDIO") is answered too (QA).
    if transport.strip().lower() == "http" or _stdin_is_a_terminal():
        raise exc
    message = _with_path_origin(exc, args)
    print(f"graph-memory: error: {message}", file=sys.stderr, flush=True)
    if settings is None:   # logs as they are by default
        from graph_memory.logs import configure_logging

        configure_logging()
    from graph_memory.mcp.server import build_refusing_server

    server = build_refusing_server(message, profile=profile, extra_tools=_typed_tools_if_valid(settings))
    if _serve_stdio_session(server, lambda: None, max_reply_bytes, exit_status=EXIT_ERROR):
        # Not the interpreter's teardown, which puts back the default handlers: a second signal
        # meanwhile ended the process by that signal instead of exit 1 (found by QA).
        _exit_at_once(signal.SIGTERM, None, exit_status=EXIT_ERROR)
    return EXIT_ERROR


def _typed_tools_if_valid(settings: Settings | None) -> tuple[ToolSpec, ...]:
    """The typed tools ``settings`` declare, listed by a refused start as a healthy one lists them;
    none when the settings or a schema file are what was refused."""
    if settings is None or settings.schemas_dir is None:
        return ()
    from graph_memory.mcp.typed import load_typed_tools

    try:
        return load_typed_tools(settings.schemas_dir)
    except GraphError:
        return ()


def _stdin_is_a_terminal() -> bool:
    """Whether file descriptor 0, which the stdio transport reads, is a terminal (not
    ``sys.stdin``, which a test runner replaces)."""
    import os

    try:
        return os.isatty(0)
    except OSError:
        return False


def _schemas_beside(file_path: Path) -> tuple[Path, int] | None:
    """The ``schemas`` folder beside ``file_path`` (MemoryMesh's layout) and how many
    ``*.schema.json`` files it holds, or None when it holds none (or cannot be read)."""
    folder = file_path.parent / "schemas"
    try:
        count = sum(1 for _ in folder.glob("*.schema.json"))
    except OSError:
        return None
    return (folder, count) if count else None


def _backend_kind(settings: Settings) -> str:
    """The backend ``settings`` select, for the start-up log (``Backend.kind`` once it is open)."""
    return "postgres" if settings.database_url is not None else "sqlite"


def _loop_options() -> dict[str, bool]:
    """The event loop stdio is served on: uvloop where it is installed (a dependency on Linux and
    macOS), else asyncio's own. Every call wakes the loop several times (a line read, the SDK's
    hand-over to the request's task, the reply written); uvloop does each of those in about half
    the time, a third of an empty call's cost in the server (issue 15)."""
    import importlib.util

    return {"use_uvloop": importlib.util.find_spec("uvloop") is not None}


# How long a stdio server stopped by SIGTERM/SIGINT goes on to answer the calls it has read and
# to write out what it has started to write, before it exits anyway.
STOP_GRACE_SECONDS = 5.0


async def _serve_stdio(server: SdkServer, on_signal: Callable[[], None], max_reply_bytes: int,
                       exit_status: int = EXIT_OK) -> bool:
    """Serve one stdio connection until stdin closes or SIGTERM/SIGINT arrives.

    A signal ends the input, as a client closing stdin does: no further request is read, the
    calls already read are answered and every reply is written out whole, then the server stops
    (exit 0). It exited at once before, cutting a large reply in the middle of its line although
    the call's write had committed (found by QA). Past :data:`STOP_GRACE_SECONDS`, or at a
    second signal, ``on_signal`` runs on the event loop thread (so no tool call is
    mid-transaction: calls run their transaction without yielding to the loop) and the process
    exits at once with ``exit_status``. Returns whether a signal stopped it.
    """
    import os

    import anyio

    from graph_memory.logs import get_logger
    from graph_memory.mcp.stdio import stdio_streams

    input_stream: Any = None
    stopping_on_signal = False

    def stop_now() -> None:
        on_signal()
        sys.stderr.flush()
        os._exit(exit_status)

    async def stop_later() -> None:
        await anyio.sleep(STOP_GRACE_SECONDS)
        get_logger("graph_memory.cli").warning("stop_grace_ended", seconds=STOP_GRACE_SECONDS)
        stop_now()

    async with anyio.create_task_group() as tasks:

        async def stop_on_signal() -> None:
            nonlocal stopping_on_signal
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for signum in signals:
                    get_logger("graph_memory.cli").info("signal_received", signal=signal.Signals(signum).name)
                    if stopping_on_signal or input_stream is None or not input_stream.can_end:   # a terminal
                        stop_now()
                    stopping_on_signal = True
                    tasks.start_soon(stop_later)
                    await input_stream.aclose()   # the end of input: answer what was read, then stop

        tasks.start_soon(stop_on_signal)
        _say_waiting_on_a_terminal()
        async with stdio_streams(max_reply_bytes) as (read_stream, write_stream):
            input_stream = read_stream
            await server.run(read_stream, write_stream, server.create_initialization_options())
        tasks.cancel_scope.cancel()
    # The signal receiver is gone: from here a further signal stops at once (see
    # _serve_stdio_session, which sets this again once the event loop has put back the handlers it found).
    _exit_at_further_signals(exit_status)
    return stopping_on_signal


def _exit_at_further_signals(exit_status: int = EXIT_OK) -> None:
    """From now on SIGTERM and SIGINT end the process at once with ``exit_status`` (:func:`_exit_at_once`)."""
    import functools

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, functools.partial(_exit_at_once, exit_status=exit_status))


def _exit_at_once(signum: int, frame: object, exit_status: int = EXIT_OK) -> None:
    """A signal while a stdio server closes down: every acknowledged write is committed; exit now
    (0 unless the start was refused)."""
    import os

    sys.stderr.flush()
    os._exit(exit_status)


def _say_waiting_on_a_terminal() -> None:
    """When stdin is a terminal (someone ran ``graph-memory`` by hand), say on stderr what the
    silence means and how to quit; an MCP client starting the server sees nothing of it."""
    if _stdin_is_a_terminal():
        print("graph-memory is waiting for an MCP client on stdin (it speaks JSON-RPC, one message per "
              "line); configure your MCP client to start it, or use --transport http. "
              "Quit with Ctrl-D or Ctrl-C.", file=sys.stderr, flush=True)


def _http_ready_problem(settings: Settings) -> str | None:
    """In HTTP mode, GET ``/readyz`` of the local server; None when it answers 200."""
    import urllib.error
    import urllib.request

    host = settings.http_host
    host = "127.0.0.1" if host in ("0.0.0.0", "") else ("[::1]" if host == "::" else host)
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    url = f"http://{host}:{settings.http_port}/readyz"
    try:
        with urllib.request.urlopen(url, timeout=3) as response:
            return None if response.status == 200 else f"{url} answered {response.status}"
    except urllib.error.HTTPError as exc:
        return f"{url} answered {exc.code}"
    except OSError as exc:
        return f"the HTTP server does not answer at {url} ({exc})"


def cmd_healthcheck(args: argparse.Namespace) -> int:
    """Exit 0 when the database opens and has every migration applied, else 1 with the reason."""
    settings = _settings(args)
    from graph_memory.service import database_being_built, opened

    if (build := database_being_built(settings)) is not None:
        # As when a first start imported into the database it had created: healthy while it
        # works (an orchestrator must not restart it: that would start the import over).
        print(f"ok: starting: {settings.database_path} is being built beside its name ({build.name}: a "
              f"first-start import, or an import into a new database); it is served once complete")
        return EXIT_OK
    with opened(settings, "readonly") as backend:
        state = backend.schema_status()
    if state.pending:
        print(f"unhealthy: {plural(len(state.pending), 'migration')} pending on {backend.path}; run: "
              f"{graph_memory_command('migrate', database=backend.path)}", file=sys.stderr)
        return EXIT_ERROR
    if settings.transport == "http":
        problem = _http_ready_problem(settings)
        if problem:
            print(f"unhealthy: {problem}", file=sys.stderr)
            return EXIT_ERROR
    print(f"ok: {backend.path} at schema version {state.version}"
          + (f" ({backend.kind})" if backend.kind != "sqlite" else ""))
    return EXIT_OK


# -- import / export -----------------------------------------------------------------------------


def cmd_import(args: argparse.Namespace) -> int:
    """Merge an upstream JSONL/JSON file into the database (or, with --dry-run, report only)."""
    if args.discover or args.file is None:
        return cmd_discover(args)
    settings = _settings(args)
    from graph_memory.service import import_file

    report = import_file(settings, args.file, skip_invalid=args.skip_invalid, dry_run=args.dry_run,
                         new_lines=args.new_lines, progress=lambda total: _Bar(total, "importing", "item"))
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
    else:
        _print_import(report)
    return EXIT_OK


def cmd_discover(args: argparse.Namespace) -> int:
    """``import --discover``: list the reference server's memory files and the command importing each."""
    if args.file is not None or not args.discover or args.skip_invalid or args.dry_run or args.new_lines:
        args.usage_error("name the FILE to import, or pass --discover (with --json at most) to find the "
                         "reference server's memory files")
    settings = _settings(args)
    from graph_memory.discover import find_reference_files, reference_places, render

    places = reference_places()
    print(render(find_reference_files(places), settings.database_label, places, as_json=args.json))
    return EXIT_OK


def _print_import(report: ImportReport) -> None:
    f = report.file
    if report.dry_run:
        print(f"dry run, nothing was written: importing {report.source} into {report.database} would add")
    else:
        print(f"imported {report.source} into {report.database}:")
    merged = report.entities_merged
    print(f"  entities:      {report.entities_created} created, {merged} merged into "
          f"{'an existing one' if merged == 1 else 'existing ones'} ({report.type_conflicts} with another type "
          f"there, which was kept)")
    print(f"  observations:  {report.observations_added} added")
    # An existing relation keeps its own weight: the import adds, it never changes what is there.
    left_out = (f", {report.relations_left_out} left out (new lines relating an entity deleted here since the "
                f"last import)" if report.relations_left_out else "")
    print(f"  relations:     {report.relations_created} created, {report.relations_skipped} already present{left_out}")
    print(f"  file:          {plural(f['lines'], 'line')}, {plural(f['entities'], 'entity')}, "
          f"{plural(f['observations'], 'observation')}, {plural(f['relations'], 'relation')}; "
          f"{plural(f['merged_entities'], 'duplicate entity line')} merged, "
          f"{plural(f['collapsed_observations'], 'duplicate observation')} collapsed, "
          f"{plural(f['duplicate_relations'], 'duplicate relation')} dropped, "
          f"{plural(f['dangling_relations'], 'relation')} to entities not in the file kept, "
          f"{plural(f['unknown_keys'], 'unknown key')} ignored")
    if replaced := f.get("replaced_surrogates", 0):
        print(f"  replaced:      {plural(replaced, 'lone surrogate')} (half of a character, such as an emoji a "
              f"client cut) with U+FFFD")
    if unchanged := f.get("unchanged_lines", 0):
        print(f"  unchanged:     {plural(unchanged, 'line')} as when the file was last imported or recorded, left out "
              f"(--new-lines)")
    if report.lines_of:
        print(f"  compared with: the lines recorded for {report.lines_of} (this file has no record under its own "
              f"path: moved here, or copied with the database)")
    if report.lines_gone:
        print(f"  gone:          {plural(report.lines_gone, 'line')} of the file at its last import or record "
              f"{'is' if report.lines_gone == 1 else 'are'} no longer in it (removed or edited there); a merge "
              f"never deletes, so what {'it' if report.lines_gone == 1 else 'they'} held stays in the memory: "
              f"delete it with the tools if it should go")
        if held := report.gone_held:
            print(f"  still held:    {plural(len(held), 'item')} of those lines, as the line had it (--json lists "
                  f"all):")
            for item in held[:_LISTED_NAMES]:
                print(f"    {_held_item(item)}")
            if len(held) > _LISTED_NAMES:
                print(f"    … and {len(held) - _LISTED_NAMES} more")
    if bad_utf8 := report.replaced_utf8_lines:
        shown = ", ".join(map(str, bad_utf8[:10])) + (", …" if len(bad_utf8) > 10 else "")
        print(f"  replaced:      bytes that are not UTF-8 on {plural(len(bad_utf8), 'line')} ({shown}) with U+FFFD, "
              f"as the reference server reads them (the file is unchanged)")
    if report.dry_run and report.entities_to_create:
        names = report.entities_to_create
        shown = ", ".join(json.dumps(n, ensure_ascii=False) for n in names[:_LISTED_NAMES])
        more = f" and {len(names) - _LISTED_NAMES} more (--json lists them all)" if len(names) > _LISTED_NAMES else ""
        print(f"  would create:  {shown}{more}")
        if (recorded := report.recorded) is not None and recorded.kind != "upgrade":
            moved = ("" if recorded.path == str(Path(report.source).absolute()) else
                     f" (recorded as {recorded.path}: moved here, or copied with the database?)")
            print(f"  note:          this file{moved} was {recorded.done_with_database} this database at "
                  f"{recorded.recorded_at}; the entities above are not in it now: added to the file since, or "
                  f"deleted from the memory since (an import brings those back)")
    for label, labels, lines in (("skipped line", "skipped lines", report.skipped_lines),
                                 ("invalid line (skipped)", "invalid lines (skipped)", report.invalid_lines)):
        for number, reason in lines[:_LISTED_LINES]:
            print(f"  {label} {number}: {reason}")
        if len(lines) > _LISTED_LINES:
            more = plural(len(lines) - _LISTED_LINES, f"more {label}", f"more {labels}")
            print(f"  … and {more} (--json lists them all)")


def cmd_export(args: argparse.Namespace) -> int:
    """Write the graph in the reference server's JSONL format to a file (atomically) or stdout;
    with --with-weights, relation weights other than 1.0 too (a ``"weight"`` key that
    ``graph-memory import`` reads back); with --format mermaid|dot a picture instead; with
    --entity (and --hops) only that neighbourhood."""
    if args.with_weights and args.format == "memorymesh":
        args.usage_error("--with-weights belongs to the reference format; --format memorymesh always writes weights")
    if args.with_weights and args.format != "jsonl":
        args.usage_error(f"--with-weights is for --format jsonl; a {args.format} picture always shows weights "
                         f"other than 1")
    if args.hops is not None and not args.entity:
        args.usage_error("--hops needs --entity NAME: the neighbourhood of which entity?")
    settings = _settings(args)
    from graph_memory.service import export_graph

    to_stdout = args.output in (None, "-")
    output = _write_stdout if to_stdout else Path(args.output).expanduser().absolute()
    result = export_graph(settings, output, with_weights=args.with_weights, fmt=args.format,
                          entities=args.entity or (), hops=1 if args.hops is None else args.hops, force=args.force)
    where = "stdout" if to_stdout else str(output)
    weighted = result.weighted
    print(f"exported {plural(result.entities, 'entity')} and {plural(result.relations, 'relation')} "
          f"of {settings.database_label} to {where}"
          + (f" with {plural(weighted, 'relation weight')}" if args.with_weights and weighted else "")
          + ("" if args.format == "jsonl" else f" as {args.format}"),
          file=sys.stderr)
    if result.recorded:
        print(f"recorded in the database as its legacy file {output}, so that a later start (and "
              f"import --new-lines) tells what another program changes in it from what graph-memory wrote",
              file=sys.stderr)
    elif result.not_recorded:
        print(f"note: {output} is the database's legacy file, and what was written could not be recorded in the "
              f"database ({result.not_recorded}): the next start takes it for a change of the file, and the next "
              f"export over it is refused until that is merged (import --new-lines) or --force is given",
              file=sys.stderr)
    if weighted and not args.with_weights and args.format == "jsonl":
        print(f"note: {plural(weighted, 'relation weight')} {'was' if weighted == 1 else 'were'} not written "
              f"(the reference format has no weight); add --with-weights to keep {'it' if weighted == 1 else 'them'}",
              file=sys.stderr)
    return EXIT_OK


def _held_item(item: dict[str, Any]) -> str:
    """An entity, relation or lost observations of a legacy line, for a list: ``entity "Bob"
    (person)``, ``relation "Alice" knows "Bob"``, ``1 observation of "Alice" the file no longer
    has: "likes tea"`` (names as JSON strings: quotes and control characters shown)."""
    def quoted(name: object) -> str:
        return json.dumps(name, ensure_ascii=False)

    if item.get("type") == "relation":
        return f"relation {quoted(item.get('from'))} {item.get('relationType')} {quoted(item.get('to'))}"
    if item.get("type") == "observations":
        lost = item.get("observations") or []
        return (f"{plural(len(lost), 'observation')} of {quoted(item.get('entityName'))} the file no longer has: "
                + ", ".join(quoted(o) for o in lost[:3]) + (", …" if len(lost) > 3 else ""))
    return f"entity {quoted(item.get('name'))} ({item.get('entityType')})"


def _write_stdout(write: Callable[[TextIO], int]) -> None:
    """Run ``write(stream)`` on stdout as UTF-8 with ``\\n`` line ends, whatever the locale or OS."""
    import io

    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:  # a replaced stdout without a byte layer
        write(sys.stdout)
        return
    sys.stdout.flush()
    out = io.TextIOWrapper(buffer, encoding="utf-8", newline="", write_through=False)
    try:
        write(out)
        out.flush()
    finally:
        out.detach()


def cmd_view(args: argparse.Namespace) -> int:
    """Serve the read-only web page of the database until Ctrl-C."""
    settings = _settings(args)
    from graph_memory.view import serve_view

    serve_view(settings, host=args.view_host, port=args.view_port, open_browser=not args.no_browser)
    return EXIT_OK


# -- backup / stats / migrate ------------------------------------------------------------------


def cmd_backup(args: argparse.Namespace) -> int:
    """Copy the database with SQLite's online backup API, verified, while a server may run."""
    settings = _settings(args)
    from graph_memory.service import backup

    with _Bar(None, "backing up", "page") as bar:
        result = backup(settings, args.dest, force=args.force, progress=bar.pages)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
    else:
        c = result.counts
        print(result.path)
        print(f"  {plural(result.bytes, 'byte')}, schema version {result.schema_version}, integrity ok; "
              f"{plural(c.entities, 'entity')}, {plural(c.observations, 'observation')}, "
              f"{plural(c.relations, 'relation')}")
    return EXIT_OK


def cmd_restore(args: argparse.Namespace) -> int:
    """Make the database hold a backup's memory, saving what it held first."""
    settings = _settings(args)
    from graph_memory.service import restore

    result = restore(settings, args.backup)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
    else:
        c = result.counts
        print(f"restored {result.source} into {result.path}")
        print(f"  schema version {result.schema_version}; {plural(c.entities, 'entity')}, "
              f"{plural(c.observations, 'observation')}, {plural(c.relations, 'relation')}")
        if result.saved is not None:
            print(f"  what it held before is saved in {result.saved}")
    return EXIT_OK


def cmd_copy(args: argparse.Namespace) -> int:
    """Copy the whole memory into another, empty database (SQLite file or PostgreSQL URL), exactly."""
    settings = _settings(args)
    from graph_memory.service import copy_memory

    with _Bar(None, "copying", "row") as bar:
        result = copy_memory(settings, args.to, progress=bar.advance)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
    else:
        print(f"copied {result.source} into {result.destination}")
        print(f"  {plural(result.entities, 'entity')}, {plural(result.observations, 'observation')}, "
              f"{plural(result.relations, 'relation')} ({result.inverse_relations} materialized inverses), "
              f"{plural(result.records, 'legacy-import record')}; times, weights and creation order kept")
    return EXIT_OK


def cmd_stats(args: argparse.Namespace) -> int:
    """Counts, size and schema version of the database."""
    settings = _settings(args)
    from graph_memory.service import stats

    result = stats(settings)
    data = result.to_dict()
    if args.json:
        print(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        _print_stats(data, result.counts)
        _print_import_records(result.records, result.owes)
    return EXIT_OK


def _print_stats(data: dict[str, Any], counts: GraphCounts) -> None:
    files = " + ".join(f"{name} {size}" for name, size in data["files"].items())
    pending = data["pending_migrations"]
    print(f"database:        {data['database']}" + (f" ({data['backend']})" if data["backend"] != "sqlite" else ""))
    print(f"size:            {data['size_bytes']} bytes ({_human_size(data['size_bytes'])}; {files})")
    print(f"schema version:  {data['schema_version']}"
          + (f" ({len(pending)} pending: {', '.join(pending)}; run: "
             f"{graph_memory_command('migrate', database=data['database'])})" if pending
             else " (up to date)"))
    print(f"entities:        {counts.entities}")
    for kind, n in counts.entities_by_type.items():
        print(f"  {n:>8}  {kind}")
    print(f"observations:    {counts.observations}")
    print(f"relations:       {counts.relations}"
          + (f" ({counts.dangling_relations} to or from an entity that does not exist)"
             if counts.dangling_relations else ""))
    for kind, n in counts.relations_by_type.items():
        print(f"  {n:>8}  {kind}")


def _print_import_records(records: list[ImportRecord], owed: str | None) -> None:
    """The ``legacy imports:`` lines of ``stats`` (records of migration 0004, oldest first)."""
    lines = [r.describe() for r in records]
    if owed == "import":
        lines.append("first start pending: the next start imports the legacy file, if there is one")
    elif owed == "baseline":
        lines.append("first start after the upgrade pending: the next start records the legacy file's state")
    print("legacy imports:  " + (lines[0] if lines else "none recorded"))
    for line in lines[1:]:
        print(f"                 {line}")


def _human_size(size: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def cmd_migrate(args: argparse.Namespace) -> int:
    """Apply pending migrations, or with --check only report them (exit status 3 when pending)."""
    settings = _settings(args)
    from graph_memory.db.backend import database_missing
    from graph_memory.service import known_migrations, opened

    path = settings.database_label
    if args.check and database_missing(settings):
        known = known_migrations(settings)
        print(f"{path} does not exist yet; {plural(len(known), 'migration')} pending: "
              f"{', '.join(m.name for m in known)}")
        return EXIT_PENDING
    # --check only reads: it works for a user who may read the database but not write it.
    with opened(settings, "readonly" if args.check else "unmigrated") as backend:
        state = backend.schema_status()  # refuses an edited or newer database
        if args.check:
            if state.pending:
                print(f"{path} is at schema version {state.version}; {plural(len(state.pending), 'migration')} "
                      f"pending: {', '.join(m.name for m in state.pending)}")
                return EXIT_PENDING
            print(f"{path} is up to date at schema version {state.version}")
            return EXIT_OK
        applied = backend.migrate()
        final = backend.schema_status()
    for migration in applied:
        print(f"applied {migration.name}")
    print(f"{path} is up to date at schema version {final.version}")
    return EXIT_OK


# -- the parser --------------------------------------------------------------------------------


_Command = Callable[..., argparse.ArgumentParser]   # adds one subcommand: command(name, help, handler, epilog)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (commands: serve, import, export, backup, restore, stats, migrate, copy,
    healthcheck, view)."""
    from graph_memory import package_version

    parser = argparse.ArgumentParser(
        prog="graph-memory",
        description="Knowledge-graph memory for AI assistants over MCP (SQLite + FTS5). "
                    "Without a command, serves MCP on the transport MEMORY_TRANSPORT names (stdio).",
        epilog="The database is MEMORY_FILE_PATH (or --database). Results go to stdout; logs, progress and "
               "errors to stderr.\n\n" + EXIT_STATUS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"graph-memory {package_version()}")
    parser.add_argument("--database", help="database file (overrides MEMORY_FILE_PATH)")
    parser.set_defaults(handler=cmd_serve)
    # Every command also takes --database after its name; SUPPRESS keeps the top-level value otherwise.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--database", default=argparse.SUPPRESS, help="database file (overrides MEMORY_FILE_PATH)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")

    def command(name: str, help: str, handler: Callable[[argparse.Namespace], int],
                epilog: str | None = None) -> argparse.ArgumentParser:
        cmd = sub.add_parser(name, help=help, description=help[0].upper() + help[1:] + ".", parents=[common],
                             epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
        cmd.set_defaults(handler=handler)
        return cmd

    serve = command("serve", "serve MCP (the default command)", cmd_serve)
    serve.add_argument("--transport", choices=["stdio", "http"], help="overrides MEMORY_TRANSPORT")
    serve.add_argument("--host", help="HTTP bind address (overrides MEMORY_HTTP_HOST)")
    serve.add_argument("--port", type=int, help="HTTP port (overrides MEMORY_HTTP_PORT)")
    _add_import_command(command)
    _add_export_command(command)
    _add_data_commands(command)
    _add_copy_command(command)
    _add_view_command(command)
    command("healthcheck", "exit 0 when the database opens and is fully migrated", cmd_healthcheck)
    return parser


def _add_import_command(command: _Command) -> None:
    imp = command("import", "merge a reference-server memory.jsonl/.json into the database", cmd_import,
                  epilog="Existing entities gain the observations they lack (their type is kept); existing "
                         "relations are skipped (their weight is kept). A relation's \"weight\" (written by "
                         "'export --with-weights') is read back. One transaction: a refused file writes "
                         "nothing.\n\n"
                         "--discover looks where the reference server keeps memory.jsonl by default (its "
                         "package folder: npx's cache, global node_modules, /app/dist) and prints each file "
                         "found with the command importing it into this database.\n\n"
                         "exit status: 0 imported (or dry run done, or discovery done), 1 refused (the line "
                         "and reason on stderr)")
    imp.usage = ("%(prog)s [--database DB] [--new-lines] [--skip-invalid] [--dry-run] [--json] FILE\n"
                 "       %(prog)s [--database DB] --discover [--json]")
    imp.set_defaults(usage_error=imp.error)
    imp.add_argument("file", nargs="?", help="the legacy file (read only, never modified)")
    imp.add_argument("--discover", action="store_true",
                     help="instead of importing, find the reference server's memory files and print how to "
                          "import each")
    imp.add_argument("--new-lines", action="store_true",
                     help="merge only the lines that were not in FILE when it was last imported into this "
                          "database (what changed in the file since; what was deleted from the memory since "
                          "stays deleted)")
    imp.add_argument("--skip-invalid", action="store_true", help="skip and list bad lines instead of refusing")
    imp.add_argument("--dry-run", action="store_true", help="report what would happen; write nothing")
    imp.add_argument("--json", action="store_true", help="print the report as JSON")


def _add_export_command(command: _Command) -> None:
    exp = command("export", "write the graph as reference-server JSONL, or as a Mermaid or DOT picture", cmd_export,
                  epilog="Entities then relations, one compact JSON object per line, as the reference server "
                         "writes them. A file is replaced atomically (never left half-written).\n\n"
                         "Relation weights are not part of that format: by default they are left out (the "
                         "output is byte for byte what the reference server writes). With --with-weights a "
                         "relation whose weight is not 1.0 gets a last key \"weight\", which the import "
                         "command reads back (the reference server ignores it): a full copy.\n\n"
                         "--format mermaid / dot write a picture instead (names and types on the nodes, relation "
                         "types on the arrows, every text escaped for the format), of the whole graph or, with "
                         "--entity, of the entities within --hops relations of the named ones.")
    exp.add_argument("-o", "--output", help="output file (default: stdout)")
    exp.add_argument("--force", action="store_true",
                     help="write over the output file even when that loses what it holds: a legacy file of the "
                          "database changed since it was recorded (or never imported), or a file an empty "
                          "database would empty")
    exp.set_defaults(usage_error=exp.error)
    exp.add_argument("--with-weights", action="store_true",
                     help="also write relation weights (a \"weight\" key on relations whose weight is not 1.0)")
    exp.add_argument("--format", choices=["jsonl", "memorymesh", "mermaid", "dot"], default="jsonl",
                     help="jsonl (the reference server's format, the default); memorymesh: MemoryMesh's memory "
                          "file (node and edge lines, every weight), which MemoryMesh reads; or a picture: "
                          "mermaid (a flowchart to paste into Markdown) or dot (Graphviz: dot -Tsvg)")
    exp.add_argument("--entity", action="append", metavar="NAME",
                     help="only the neighbourhood of this entity (repeatable): it and the entities within "
                          "--hops relations of it, with the relations among them")
    exp.add_argument("--hops", type=int, metavar="N", help="how far the neighbourhood of --entity reaches "
                                                           "(default 1; 0: the named entities only)")
    exp.set_defaults(usage_error=exp.error)


def _add_data_commands(command: _Command) -> None:
    """backup, restore, stats and migrate."""
    bak = command("backup", "copy the database consistently, also while a server runs", cmd_backup,
                  epilog="Uses SQLite's online backup API, then checks the copy (integrity_check and the "
                         "search index). DEST may be a directory: the copy is then named "
                         "<database>-YYYYmmdd-HHMMSS.db inside it.\n\n"
                         "exit status: 0 copied and verified, 1 refused or failed (nothing left at DEST)")
    bak.add_argument("dest", help="backup file, or a directory to put a time-stamped copy in")
    bak.add_argument("--force", action="store_true", help="replace DEST if it exists")
    bak.add_argument("--json", action="store_true", help="print the result as JSON")

    res = command("restore", "make the database hold a backup's memory (what it holds is saved first)", cmd_restore,
                  epilog="BACKUP is a file made by the backup command (or any graph-memory SQLite database); it "
                         "is only read. Its copy is verified and migrated to this version, what the database "
                         "holds now is saved beside it as <database>-before-restore-YYYYmmdd-HHMMSS.db, and the "
                         "copy is written into the database in one transaction. Stop the servers using the database "
                         "first: it refuses while another process has it open. Do not copy a backup over the "
                         "database file instead: its -wal file would be replayed onto it.\n\n"
                         "exit status: 0 restored, 1 refused or failed (nothing was changed)")
    res.add_argument("backup", metavar="BACKUP", help="the backup file to restore")
    res.add_argument("--json", action="store_true", help="print the result as JSON")

    stats = command("stats", "show counts, size and schema version of the database", cmd_stats)
    stats.add_argument("--json", action="store_true", help="print as JSON (for scripts)")

    mig = command("migrate", "apply pending schema migrations (or just report them)", cmd_migrate,
                  epilog="exit status:\n"
                         "  0  up to date, or the pending migrations were applied\n"
                         "  1  refused: the database was migrated by a newer graph-memory, an applied "
                         "migration was edited, or the database cannot be opened\n"
                         "  3  --check only: migrations are pending")
    mig.add_argument("--check", action="store_true", help="only report; exit 3 when migrations are pending")


def _add_copy_command(command: _Command) -> None:
    cp = command("copy", "copy the whole memory into another, empty database (SQLite <-> PostgreSQL)", cmd_copy,
                 epilog="Copies the database this command is configured for (MEMORY_DATABASE_URL when set, else "
                        "--database / MEMORY_FILE_PATH) into DEST, exactly: entities, observations and relations "
                        "with their weights, created/updated times (unknown stays unknown) and creation order, "
                        "the materialized inverse relations, and the legacy-import records and first-start duty. "
                        "Each database keeps its own key for paging cursors (a cursor of one is refused by the "
                        "other). Afterwards 'export --with-weights' of both is byte-identical.\n\n"
                        "DEST is a SQLite file (created when missing) or a postgresql:// URL; it is migrated "
                        "first and must be empty (no entities, relations or import records): nothing is ever "
                        "merged or overwritten. The source is read in one consistent snapshot and never written "
                        "(servers may keep running on it; their later writes are not copied); DEST is written in "
                        "one transaction, so a failure leaves it empty. The password of a DEST URL comes from "
                        "the URL or libpq's PGPASSWORD / ~/.pgpass (MEMORY_DATABASE_PASSWORD_FILE is the "
                        "source's); it is never printed.\n\n"
                        "exit status: 0 copied, 1 refused or failed (the message on stderr says why; nothing "
                        "was written to DEST)")
    cp.add_argument("--to", required=True, metavar="DEST",
                    help="the destination: a SQLite file path or a postgresql://user@host:port/dbname URL")
    cp.add_argument("--json", action="store_true", help="print the result as JSON")


def _add_view_command(command: _Command) -> None:
    view = command("view", "look at the memory in a web browser (read-only)", cmd_view,
                   epilog="Serves a local page: search (the three modes), entity pages with relations in and "
                          "out, a neighbourhood graph, counts by type, the most connected entities and the "
                          "latest additions. The database is opened read-only (nothing is ever written, and a "
                          "running server may keep writing); the page answers only GET, only for the Host "
                          "names of MEMORY_ALLOWED_HOSTS. Stop it with Ctrl-C.")
    # Not the settings' http_host/http_port: those configure `serve`, and `_settings` reads these names.
    view.add_argument("--host", dest="view_host", default="127.0.0.1",
                      help="bind address (default 127.0.0.1: this machine only)")
    view.add_argument("--port", dest="view_port", type=int, default=0, help="port (default 0: a free one)")
    view.add_argument("--no-browser", action="store_true", help="only print the URL; do not open a browser")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``graph-memory`` console script. Returns the exit status."""
    _fill_closed_standard_streams()
    args = build_parser().parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    if getattr(args, "command", None) in _INTERRUPTED:   # a data command: SIGTERM unwinds it as Ctrl-C does
        signal.signal(signal.SIGTERM, _terminate)
    try:
        return handler(args)
    except GraphError as exc:
        print(f"graph-memory: error: {_with_path_origin(exc, args)}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:  # e.g. `graph-memory export | head`: the reader left, nothing to report
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_ERROR
    except OSError as exc:
        if exc.errno not in _CANNOT_WRITE:
            raise
        # e.g. `graph-memory export > file` on a full disk: a traceback said less (found by QA)
        where = exc.filename or "the output"
        print(f"graph-memory: error: writing {where} failed: {exc.strerror}; free some space there or write "
              f"elsewhere", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt as exc:
        said = _INTERRUPTED.get(getattr(args, "command", None) or "")
        if said is not None:
            print(f"graph-memory: {args.command} interrupted: {said}", file=sys.stderr)
        return 143 if isinstance(exc, _Terminated) else 130


def _fill_closed_standard_streams() -> None:
    """Open the null device on each of stdin, stdout and stderr that the parent left closed
    (``graph-memory <&-``): Python had no ``sys.stdin`` (a traceback instead of the message, found
    by QA), and the next file opened would take the free number and be read or written as that
    stream. A closed stdin then reads as an empty one."""
    import os

    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            opened = os.open(os.devnull, os.O_RDWR)   # the lowest free number: this one
            if opened != fd:
                os.dup2(opened, fd)
                os.close(opened)
    for name, fd, mode in (("stdin", 0, "r"), ("stdout", 1, "w"), ("stderr", 2, "w")):
        if getattr(sys, name) is None:
            setattr(sys, name, open(fd, mode, closefd=False))  # noqa: SIM115 (the process's own stream)


# Write failures of the disk rather than of the program: full, over quota, a file size limit, I/O.
_CANNOT_WRITE = frozenset(getattr(errno, name) for name in ("ENOSPC", "EDQUOT", "EFBIG", "EIO") if hasattr(errno, name))


class _Terminated(KeyboardInterrupt):
    """SIGTERM during a data command (a service manager, a timeout, `kill`): unwound as Ctrl-C is,
    so its temporary files are removed (a killed backup left a full-size hidden copy: found by QA)."""


def _terminate(signum: int, frame: object) -> None:
    raise _Terminated


# What an interrupted (Ctrl-C) data command left behind: each writes in one transaction, or to a
# temporary file it renames only when complete. `serve` and `view` are stopped this way as usual.
_INTERRUPTED = {
    "import": "nothing was imported (an import is one transaction); run the same command again",
    "copy": "nothing was copied (the destination was left empty); run the same command again",
    "export": "no output was kept (a file is replaced only once it is complete); run the same command again",
    "backup": "no copy was left at the destination; run the same command again",
    "restore": "it writes in one transaction: the database holds what it held before or the whole backup "
               "(check with 'stats'); run the same command again if needed",
    "migrate": "run 'migrate' again: it applies what is still pending",
    "stats": "nothing was changed",
    "healthcheck": "nothing was changed",
}


if __name__ == "__main__":
    sys.exit(main())
