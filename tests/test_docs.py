"""The README stays true: its commands, every tool, setting and command documented."""

from __future__ import annotations

import re

import pytest

from graph_memory.mcp.tools import TOOLS
from graph_memory.settings import Settings

from helpers import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")


def fenced_commands() -> list[str]:
    return [block.strip() for block in re.findall(r"```sh\n(.*?)```", README, flags=re.S)]


def test_readme_starts_with_the_server_and_test_commands() -> None:
    start, test = fenced_commands()[:2]
    assert start.endswith("graph-memory") and "pip install" in start
    assert "pytest" in test and "[test]" in test
    head = README[: README.index("## Use it from an MCP client")]
    assert start in head and test in head


def test_ci_runs_exactly_the_readme_test_command() -> None:
    test = fenced_commands()[1]
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert test in ci.splitlines()


@pytest.mark.parametrize("tool", [t.name for t in TOOLS])
def test_every_tool_is_documented(tool: str) -> None:
    assert f"`{tool}`" in README


@pytest.mark.parametrize("field", list(Settings.model_fields))
def test_every_setting_is_documented(field: str) -> None:
    assert f"`MEMORY_{field.upper()}`" in README


def test_every_cli_command_is_documented() -> None:
    from graph_memory.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    for command in sub.choices:  # type: ignore[attr-defined]
        assert f"graph-memory {command}" in README, command
