"""The linter and the type checker are part of the test command."""

from __future__ import annotations

import subprocess
import sys

from helpers import REPO


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, timeout=600)


def test_ruff_finds_nothing() -> None:
    result = run("ruff", "check", "service", "tests", "bench")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_finds_nothing() -> None:
    result = run("mypy")  # settings in pyproject.toml: strict, files = service/graph_memory
    assert result.returncode == 0, result.stdout + result.stderr
