"""Experiment: serve MCP stdio on asyncio pipes instead of worker threads (not shipped).

The SDK's ``stdio_server()`` wraps stdin/stdout with ``anyio.wrap_file``: every line read and
every write + flush is a hop to a worker thread and back. Profiling our server at its empty-call
floor shows those hops as the largest cost that is not protocol work (issue 6). The SDK accepts
explicit streams — ``stdio_server(stdin, stdout)`` — so a server can hand it streams backed by the
event loop's own pipe transports instead. :func:`pipe_streams` builds them, diverting fd 0 to
``/dev/null`` and fd 1 to stderr first, as the SDK's own stream claim does, so stray output from
a library can never corrupt the protocol.

``python -m bench.pipe_stdio`` runs ``graph-memory`` with these streams; the benchmark measures
its floor next to the shipped server's (``python -m bench`` prints both). Moving this into
``graph_memory`` is a two-line change in ``cli._serve_stdio``:
``async with stdio_server(*pipe_streams()) as (read_stream, write_stream):``.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import stat
import sys
from typing import Any

_LINE_LIMIT = 1 << 30   # longest request line accepted (1 GiB); the SDK's own reader has no limit


def _is_pipe_like(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class PipeReader:
    """Async iterator of the lines of a pipe, decoded as UTF-8 (bad bytes replaced, as the SDK does)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._reader: asyncio.StreamReader | None = None

    def __aiter__(self) -> PipeReader:
        return self

    async def __anext__(self) -> str:
        if self._reader is None:
            loop = asyncio.get_running_loop()
            self._reader = asyncio.StreamReader(limit=_LINE_LIMIT)
            protocol = asyncio.StreamReaderProtocol(self._reader)
            await loop.connect_read_pipe(lambda: protocol, os.fdopen(self._fd, "rb", buffering=0))
        line = await self._reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


class PipeWriter:
    """``write`` + ``flush`` onto a pipe through the event loop, with back-pressure on flush."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._writer: asyncio.StreamWriter | None = None

    async def _open(self) -> asyncio.StreamWriter:
        loop = asyncio.get_running_loop()
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(self._fd, "wb", buffering=0))
        self._writer = asyncio.StreamWriter(transport, protocol, None, loop)
        return self._writer

    async def write(self, text: str) -> None:
        writer = self._writer or await self._open()
        writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        if self._writer is not None:
            await self._writer.drain()


def pipe_streams() -> tuple[Any, Any]:
    """``(stdin, stdout)`` for ``mcp.server.stdio.stdio_server``, or ``(None, None)`` (the SDK's
    threaded default) when stdin or stdout is not a pipe or socket (a file, a terminal)."""
    if not (_is_pipe_like(0) and _is_pipe_like(1)):
        return None, None
    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    sys.stdout.flush()
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    return PipeReader(wire_in), PipeWriter(wire_out)


def main() -> int:
    """``graph-memory`` (serve on stdio) with the pipe streams."""
    import contextlib

    import mcp.server.stdio as sdk_stdio

    original = sdk_stdio.stdio_server

    @contextlib.asynccontextmanager
    async def stdio_server(stdin: Any = None, stdout: Any = None) -> Any:
        if stdin is None and stdout is None:
            stdin, stdout = pipe_streams()
        async with original(stdin, stdout) as streams:
            yield streams

    sdk_stdio.stdio_server = stdio_server  # type: ignore[assignment]
    from graph_memory.cli import main as cli_main

    return cli_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
