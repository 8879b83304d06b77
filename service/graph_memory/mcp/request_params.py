"""Malformed request parameters get an error that names the problem.

The SDK validates a request's ``params`` before any handler of ours runs and answers a mismatch
with JSON-RPC error -32602 ``Invalid request parameters`` and empty ``data``: a client that sent
``tools/call`` with ``"arguments": []`` (or a string, a number) learns only that something was
wrong. :func:`explain_invalid_params` is a server middleware (it runs before that validation):
it answers such a ``tools/call`` itself, and adds the fields and reasons pydantic found to every
other -32602 the validation raises. The reply is still -32602 with the request's own id (the
dispatcher attaches it); only the message says more.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from pydantic import ValidationError

from graph_memory.wording import json_type

__all__ = ["explain_invalid_params"]

_PREFIX = "Invalid request parameters"
# Problems listed in one message (a request can fail a union in many ways at once).
_LISTED_PROBLEMS = 3


async def explain_invalid_params(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Server middleware: refuse a ``tools/call`` whose ``arguments`` is present, not null and
    not a JSON object (``-32602 Invalid request parameters for tools/call: arguments must be a JSON object, got
    array``), and give every other invalid-params error of the SDK's validation a message naming
    the fields. Notifications pass through untouched."""
    if ctx.request_id is not None and ctx.method == "tools/call" and isinstance(ctx.params, Mapping):
        arguments = ctx.params.get("arguments")
        if arguments is not None and not isinstance(arguments, Mapping):
            got = json_type(arguments)
            raise MCPError(code=INVALID_PARAMS,
                           message=f"{_PREFIX} for tools/call: arguments must be a JSON object, got {got}; "
                                   f"pass the tool's arguments as {{\"name\": value, …}}, or {{}} for none")
    try:
        return await call_next(ctx)
    except ValidationError as exc:
        if ctx.request_id is None:
            raise
        raise MCPError(code=INVALID_PARAMS, message=f"{_PREFIX} for {ctx.method}: {_describe(exc)}") from exc


def _describe(exc: ValidationError) -> str:
    """``field: reason`` for the first few problems pydantic found, without its type tags."""
    problems: list[str] = []
    for error in exc.errors(include_url=False, include_input=False):
        # Locations name the model first ("CallToolRequest", "params", ...) and the tried members
        # of unions ("dict[str,any]"): keep only the parts that are field names or indexes.
        path = [str(part) for part in error["loc"] if isinstance(part, int) or _is_field(str(part))]
        where = ".".join(path[1:] if path[:1] == ["params"] else path) or "params"
        problem = f"{where}: {error['msg']}"
        if problem not in problems:
            problems.append(problem)
    listed = "; ".join(problems[:_LISTED_PROBLEMS])
    more = len(problems) - _LISTED_PROBLEMS
    return listed + (f"; and {more} more" if more > 0 else "")


def _is_field(part: str) -> bool:
    return (part.isidentifier() and not part[:1].isupper()) or part.startswith("_")


