"""Counts in messages agree with their nouns ("1 relation", "2 relations"): the helper, and the
command and tool messages that use it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from graph_memory import cli
from graph_memory.wording import plural

from helpers import call


@pytest.mark.parametrize(("count", "noun", "expected"), [
    (1, "entity", "1 entity"), (0, "entity", "0 entities"), (2, "entity", "2 entities"),
    (1, "relation", "1 relation"), (12, "relation", "12 relations"),
    (3, "key", "3 keys"),                     # a vowel before -y: just -s
    (2, "match", "2 matches"), (2, "box", "2 boxes"), (2, "bus", "2 buses"),
    (2, "duplicate entity line", "2 duplicate entity lines"),
    (-1, "byte", "-1 bytes"),
])
def test_plural_agrees_with_the_count(count: int, noun: str, expected: str) -> None:
    assert plural(count, noun) == expected


def test_plural_takes_an_irregular_form() -> None:
    assert plural(2, "invalid line (skipped)", "invalid lines (skipped)") == "2 invalid lines (skipped)"
    assert plural(1, "invalid line (skipped)", "invalid lines (skipped)") == "1 invalid line (skipped)"


def one_of_each(path: Path) -> Path:
    path.write_text('{"type":"entity","name":"A","entityType":"t","observations":["o"]}\n'
                    '{"type":"relation","from":"A","to":"A","relationType":"r"}\n', encoding="utf-8")
    return path


def test_command_messages_use_the_singular_for_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "memory.db")
    assert cli.main(["--database", db, "import", str(one_of_each(tmp_path / "m.jsonl"))]) == 0
    out = capsys.readouterr().out
    assert "file:          2 lines, 1 entity, 1 observation, 1 relation; 0 duplicate entity lines merged, " \
           "0 duplicate observations collapsed, 0 duplicate relations dropped, 0 relations to entities not in " \
           "the file kept, 0 unknown keys ignored" in out
    assert cli.main(["--database", db, "import", str(tmp_path / "m.jsonl")]) == 0
    assert "0 created, 1 merged into an existing one (0 with another type there" in capsys.readouterr().out
    assert cli.main(["--database", db, "export"]) == 0
    assert re.search(r"exported 1 entity and 1 relation of \S+ to stdout", capsys.readouterr().err)
    assert cli.main(["--database", db, "backup", str(tmp_path / "copy.db")]) == 0
    assert "integrity ok; 1 entity, 1 observation, 1 relation" in capsys.readouterr().out


def test_the_import_report_counts_lines_it_did_not_list_in_words(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "m.jsonl"
    for extra, expected in ((1, "… and 1 more invalid line (skipped) (--json lists them all)"),
                            (2, "… and 2 more invalid lines (skipped) (--json lists them all)")):
        source.write_text("not json\n" * (cli._LISTED_LINES + extra), encoding="utf-8")
        assert cli.main(["--database", str(tmp_path / "memory.db"), "import", "--dry-run", "--skip-invalid",
                         str(source)]) == 0
        assert expected in capsys.readouterr().out


def test_migrate_check_counts_migrations_in_words(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--database", str(tmp_path / "memory.db"), "migrate", "--check"]) == cli.EXIT_PENDING
    out = capsys.readouterr().out
    assert "migration(s)" not in out and " migrations pending: 0001_initial" in out


@pytest.mark.anyio
async def test_delete_messages_agree_with_the_requested_count(client: Any) -> None:
    await call(client, "create_entities", {"entities": [{"name": "A", "entityType": "t", "observations": ["o"]}]})
    await call(client, "create_relations", {"relations": [{"from": "A", "to": "A", "relationType": "r"}]})
    out = await call(client, "delete_relations", {"relations": [{"from": "A", "to": "A", "relationType": "r"}]})
    assert out["message"] == "Deleted 1 of 1 relation"
    out = await call(client, "delete_observations", {"deletions": [{"entityName": "A", "observations": ["o"]}]})
    assert out["message"] == "Deleted 1 observation from 1 entity"
    await call(client, "add_observations", {"observations": [{"entityName": "A", "contents": ["p", "q"]}]})
    out = await call(client, "delete_observations", {"deletions": [{"entityName": "A", "observations": ["p"]},
                                                                   {"entityName": "A", "observations": ["q"]}]})
    assert out["message"] == "Deleted 2 observations from 1 entity"   # one entity, named twice
    out = await call(client, "delete_entities", {"entityNames": ["A"]})
    assert out["message"] == "Deleted 1 of 1 entity"
    out = await call(client, "delete_entities", {"entityNames": ["A", "B"]})
    assert out["message"] == "Deleted 0 of 2 entities; not found: A, B"
