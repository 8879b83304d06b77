"""A legacy file whose folder moved with its database (found by QA: a user copied both into a
container's /data): recognised by its bytes, or warned of as perhaps moved and changed, and
``import --new-lines`` follows it.

Real databases and the real console script throughout; the helpers are those of
``test_import_records``.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

from graph_memory.db.store import Store
from test_import_records import (
    GOOD,
    MORE,
    SCRIPT,
    contents,
    events,
    mcp_session,
    records,
    replies,
    serve,
)


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    return subprocess.run([str(SCRIPT), *argv], capture_output=True, text=True, timeout=60, env=env)


def _imported_then_bob_deleted(tmp_path: Path) -> Path:
    """A folder ``a`` whose memory.jsonl the first start imported, Bob deleted through the tools
    since (so a whole-file merge would bring him back)."""
    folder = tmp_path / "a"
    folder.mkdir()
    (folder / "memory.jsonl").write_bytes(GOOD)
    done = serve(tmp_path, folder / "memory.jsonl", mcp_session(("delete_entities", {"entityNames": ["Bob"]})))
    assert done.returncode == 0 and "result" in replies(done)[1], done.stderr
    assert contents(folder / "memory.db")[0] == ["Alice"]
    return folder


def _moved(folder: Path, tmp_path: Path) -> Path:
    """``cp -r`` of the folder (the database and its legacy file together) to ``b``."""
    moved = tmp_path / "b"
    subprocess.run(["cp", "-r", str(folder), str(moved)], check=True)
    return moved


def _warnings(done: subprocess.CompletedProcess[str]) -> list[dict[str, object]]:
    assert done.returncode == 0, done.stderr
    return [e for e in events(done.stderr) if e["level"] in ("warning", "error")]


def test_a_folder_moved_with_its_database_is_recognised_and_nothing_is_imported(tmp_path: Path) -> None:
    folder = _imported_then_bob_deleted(tmp_path)
    moved = _moved(folder, tmp_path)
    legacy, db = moved / "memory.jsonl", moved / "memory.db"
    done = serve(tmp_path, legacy)
    assert _warnings(done) == []
    (info,) = [e for e in events(done.stderr) if e["event"] == "legacy_file_moved"]
    assert info["path"] == str(legacy) and info["recorded_path"] == str(folder / "memory.jsonl")
    assert info["level"] == "info" and info["recorded"] is True
    assert contents(db)[0] == ["Alice"]   # Bob stays deleted
    first, moved_record = records(db)
    assert first["kind"] == "first_start" and first["path"] == str(folder / "memory.jsonl")
    assert moved_record["kind"] == "moved" and moved_record["path"] == str(legacy)
    assert moved_record["sha256"] == first["sha256"] and moved_record["entities"] is None

    again = serve(tmp_path, legacy)   # compared under its own path from now on: quiet
    assert _warnings(again) == [] and "legacy_file_moved" not in again.stderr
    assert len(records(db)) == 2
    stats = _cli("stats", "--database", str(db))
    assert stats.returncode == 0 and f"moved: {legacy} ({len(GOOD)} bytes" in stats.stdout, stats.stdout

    legacy.write_bytes(GOOD + MORE)   # changed after the move: the usual warning, with --new-lines
    (warning,) = _warnings(serve(tmp_path, legacy))
    command = shlex.join(["graph-memory", "import", "--new-lines", str(legacy), "--database", str(db)])
    assert warning["event"] == "legacy_file_changed" and warning["merge_command"] == command
    assert "newer than what was recorded" in str(warning["message"])
    merge = _cli(*shlex.split(command)[1:])
    assert merge.returncode == 0, merge.stderr
    assert contents(db)[0] == ["Alice", "Carol"]   # Carol merged, Bob still deleted
    assert _warnings(serve(tmp_path, legacy)) == []


def test_a_moved_file_that_changed_since_warns_and_its_new_lines_merge_against_the_old_record(
        tmp_path: Path) -> None:
    folder = _imported_then_bob_deleted(tmp_path)
    moved = _moved(folder, tmp_path)
    legacy, db = moved / "memory.jsonl", moved / "memory.db"
    legacy.write_bytes(GOOD + MORE)   # the reference server wrote to it again before this start
    (warning,) = _warnings(serve(tmp_path, legacy))
    command = shlex.join(["graph-memory", "import", "--new-lines", str(legacy), "--database", str(db)])
    assert warning["event"] == "legacy_file_not_imported" and warning["merge_command"] == command
    assert warning["recorded_path"] == str(folder / "memory.jsonl")
    message = str(warning["message"])
    assert "moved here" in message and "what was deleted from the memory since stays deleted" in message
    assert "to merge it run: graph-memory import " not in message   # not the plain advice of QA's run
    assert [r["kind"] for r in records(db)] == ["first_start"]      # nothing recorded for a guess

    dry = _cli(*shlex.split(command)[1:], "--dry-run")
    assert dry.returncode == 0 and '"Carol"' in dry.stdout and '"Bob"' not in dry.stdout, dry.stdout
    assert f"compared with: the lines recorded for {folder / 'memory.jsonl'}" in dry.stdout
    merge = _cli(*shlex.split(command)[1:], "--json")
    assert merge.returncode == 0, merge.stderr
    report = json.loads(merge.stdout)
    assert report["lines_of"] == str(folder / "memory.jsonl") and report["entities_created"] == 1
    assert contents(db)[0] == ["Alice", "Carol"]
    assert records(db)[-1]["kind"] == "import" and records(db)[-1]["path"] == str(legacy)
    assert _warnings(serve(tmp_path, legacy)) == []


def test_a_moved_and_changed_file_whose_record_kept_no_line_digests_is_warned_of_a_whole_merge(
        tmp_path: Path) -> None:
    folder = _imported_then_bob_deleted(tmp_path)
    store = Store.open(folder / "memory.db")   # as a version before 0008 recorded it
    try:
        store.conn.execute("UPDATE legacy_imports SET line_digests = NULL")
    finally:
        store.close()
    moved = _moved(folder, tmp_path)
    legacy, db = moved / "memory.jsonl", moved / "memory.db"
    legacy.write_bytes(GOOD + MORE)
    (warning,) = _warnings(serve(tmp_path, legacy))
    assert warning["event"] == "legacy_file_not_imported" and "--new-lines" not in str(warning["merge_command"])
    assert "whatever was deleted from the memory since then comes back too" in str(warning["message"])
    refused = _cli("import", "--new-lines", str(legacy), "--database", str(db))
    assert refused.returncode == 1 and f"nor of {folder / 'memory.jsonl'}" in refused.stderr, refused.stderr
    assert contents(db)[0] == ["Alice"]


def test_the_dry_run_of_a_moved_file_not_started_on_yet_says_what_was_recorded_under_its_old_path(
        tmp_path: Path) -> None:
    folder = _imported_then_bob_deleted(tmp_path)
    moved = _moved(folder, tmp_path)
    dry = _cli("import", "--dry-run", str(moved / "memory.jsonl"), "--database", str(moved / "memory.db"))
    assert dry.returncode == 0, dry.stderr
    assert '  would create:  "Bob"\n' in dry.stdout
    assert f"this file (recorded as {folder / 'memory.jsonl'}: moved here" in dry.stdout
    assert "deleted from the memory since (an import brings those back)" in dry.stdout
    unchanged = _cli("import", "--new-lines", str(moved / "memory.jsonl"), "--database", str(moved / "memory.db"))
    assert unchanged.returncode == 0 and "  entities:      0 created" in unchanged.stdout, unchanged.stdout
    assert contents(moved / "memory.db")[0] == ["Alice"]
