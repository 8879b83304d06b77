"""What makes a parsed JSON value no JSON-RPC 2.0 message, in a few words.

Shared by both transports, so a client that sends a malformed message gets the same explanation
over stdio and over HTTP (kept free of the HTTP stack: the stdio path imports it at start)."""

from __future__ import annotations

from graph_memory.wording import json_type


def message_problem(message: object, carrier: str) -> str | None:
    """The problem of ``message`` (a parsed JSON value, the whole ``carrier``: "body" or "line")
    as a JSON-RPC 2.0 message, or None when none is found here (the SDK's own verdict stands)."""
    if not isinstance(message, dict):
        return f"the {carrier} is a JSON {json_type(message)}, not a message object"
    if message.get("jsonrpc") != "2.0":
        return '"jsonrpc" must be "2.0"'
    if "method" in message:
        method, params = message["method"], message.get("params", {})
        if not isinstance(method, str):
            return f'"method" must be a string, not a JSON {json_type(method)}'
        return None if isinstance(params, dict) else f'"params" must be an object, not a JSON {json_type(params)}'
    if "result" in message or "error" in message:
        return None
    return 'a request or notification needs a "method" (a response: "result" or "error")'
