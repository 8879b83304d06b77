"""The image as an MCP client runs it: ``docker run -i --rm -v graph-memory:/data IMAGE``.

A stdio session attached to the container's stdin/stdout (demultiplexed Docker frames: stdout
carries nothing but JSON-RPC, stderr the JSON log), data that outlives the container on its named
volume, and a reference-server ``memory.jsonl`` in the volume imported on first start.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from .support import (
    DB,
    SCHEMA_VERSION,
    UID,
    created,
    data_volume,
    database_state,
    get_file,
    put_file,
    put_files,
    stdio_server,
    upstream_oracle,
)

UPSTREAM_SAMPLE = Path(__file__).resolve().parents[1] / "data" / "upstream-memory.jsonl"
"""A file the reference server wrote (the repository's copy of shared/data/upstream-memory.jsonl)."""

ENTITIES = [
    {"name": "Alice", "entityType": "person", "observations": ["Works at Acme", "Speaks Japanese"]},
    {"name": "Acme Corp", "entityType": "organization", "observations": ["Makes anvils"]},
    {"name": "Zoë Ñúñez", "entityType": "person", "observations": ["Uses the 🚀 emoji", "Line\nbreak kept"]},
]
RELATIONS = [
    {"from": "Alice", "to": "Acme Corp", "relationType": "works_at"},
    {"from": "Zoë Ñúñez", "to": "Alice", "relationType": "mentors"},
]


def names(graph: dict[str, Any]) -> list[str]:
    return sorted(e["name"] for e in graph["entities"])


def triples(graph: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(r["from"], r["to"], r["relationType"]) for r in graph["relations"]}


def test_stdio_session_through_docker_run_i(docker_client: Any, image: str, volume: str) -> None:
    """Handshake, real tool calls, stdout only JSON-RPC, stderr JSON log lines, and closing stdin
    (what a client does at the end) stops the container with status 0."""
    with stdio_server(docker_client, image, volume) as session:
        config = session.container.attrs["Config"]
        assert (config["OpenStdin"], config["StdinOnce"], config["AttachStdin"], config["Tty"]) == (
            True, True, True, False), "not created the way `docker run -i` creates it"

        init = session.initialize()
        assert init["serverInfo"]["name"] == "graph-memory"
        assert "tools" in init["capabilities"]
        tools = {t["name"] for t in session.request("tools/list", {})["tools"]}
        assert {"create_entities", "create_relations", "add_observations", "search_nodes", "open_nodes",
                "read_graph", "delete_entities"} <= tools

        created_entities = session.call_tool("create_entities", {"entities": ENTITIES})
        assert [e["name"] for e in created_entities["entities"]] == [e["name"] for e in ENTITIES]
        session.call_tool("create_relations", {"relations": RELATIONS})
        # A repeated create is a no-op (upstream semantics): nothing new is returned.
        assert session.call_tool("create_entities", {"entities": ENTITIES[:1]})["entities"] == []

        found = session.call_tool("search_nodes", {"query": "anvils"})
        assert [e["name"] for e in found["entities"]] == ["Acme Corp"]
        found = session.call_tool("search_nodes", {"query": "zoë"})
        assert [e["name"] for e in found["entities"]] == ["Zoë Ñúñez"]

        graph = session.call_tool("read_graph", {})
        assert names(graph) == sorted(e["name"] for e in ENTITIES)
        assert triples(graph) == {(r["from"], r["to"], r["relationType"]) for r in RELATIONS}
        by_name = {e["name"]: e for e in graph["entities"]}
        for entity in ENTITIES:
            assert by_name[entity["name"]] == entity

        # The answer to an unknown tool is a tool error, still JSON-RPC on stdout.
        unknown = session.request("tools/call", {"name": "no_such_tool", "arguments": {}})
        assert unknown["isError"] is True

        code = session.end()
        assert code == 0, session.stderr.decode("utf-8", "replace")

        # stdout: every frame byte belongs to a JSON-RPC message, one per line, answering our ids.
        assert session.bad_lines == [], session.bad_lines
        assert session.stdout.endswith(b"\n")
        answers = [m for m in session.messages if "id" in m]
        assert [m["id"] for m in answers] == list(range(1, len(answers) + 1))
        assert all("result" in m for m in answers), answers
        # stderr: JSON log lines from start to stop.
        log = session.stderr_lines()
        assert log, "no log on stderr"
        for line in log:
            assert {"event", "level", "timestamp"} <= set(line), line
        events = [line["event"] for line in log]
        assert "server_starting" in events and events[-1] == "server_stopped", events
        assert next(line for line in log if line["event"] == "server_starting")["transport"] == "stdio"
        assert [line for line in log if line["level"] in ("error", "critical")] == []


def test_data_persists_across_containers_on_a_named_volume(docker_client: Any, image: str, volume: str) -> None:
    with stdio_server(docker_client, image, volume) as first:
        first.initialize()
        first.call_tool("create_entities", {"entities": ENTITIES})
        first.call_tool("create_relations", {"relations": RELATIONS})
        first.call_tool("add_observations", {"observations": [
            {"entityName": "Alice", "contents": ["Moved to Osaka"]}]})
        first.call_tool("delete_relations", {"relations": RELATIONS[1:]})
        written = first.call_tool("read_graph", {})
        code = first.end()
        assert code == 0, first.stderr.decode("utf-8", "replace")
        first_id = first.container.id

    with stdio_server(docker_client, image, volume) as second:
        assert second.container.id != first_id
        second.initialize()
        assert second.call_tool("read_graph", {}) == written
        alice = second.call_tool("open_nodes", {"names": ["Alice"]})["entities"]
        assert alice[0]["observations"] == ["Works at Acme", "Speaks Japanese", "Moved to Osaka"]
        assert triples(written) == {("Alice", "Acme Corp", "works_at")}
        code = second.end()
        assert code == 0, second.stderr.decode("utf-8", "replace")
        assert "legacy_import" not in [line["event"] for line in second.stderr_lines()]

    stats = database_state(docker_client, image, volume)
    assert (stats["entities"], stats["relations"], stats["observations"]) == (3, 1, 6)


def test_legacy_memory_jsonl_in_the_volume_is_imported_on_first_start(
        docker_client: Any, image: str, volume: str) -> None:
    data = UPSTREAM_SAMPLE.read_bytes()
    expected_entities, expected_relations = upstream_oracle(UPSTREAM_SAMPLE)
    assert len(expected_entities) < sum(1 for line in data.splitlines() if b'"type":"entity"' in line), \
        "the sample should contain duplicate entity lines to merge"

    # The file as the reference server's image left it in the volume: /data/memory.jsonl, uid 10001.
    with created(docker_client, image, volumes=data_volume(volume), command=["--version"]) as helper:
        put_file(helper, "/data", "memory.jsonl", data, uid=UID, mode=0o644)

    with stdio_server(docker_client, image, volume) as session:
        session.initialize()
        graph = session.call_tool("read_graph", {})
        code = session.end()
        assert code == 0, session.stderr.decode("utf-8", "replace")
        log = session.stderr_lines()

    imported = next(line for line in log if line["event"] == "legacy_import")
    assert imported["path"] == "/data/memory.jsonl" and imported["database"] == DB
    assert (imported["entities_created"], imported["relations_created"]) == (
        len(expected_entities), len(expected_relations))

    got = {e["name"]: e for e in graph["entities"]}
    assert sorted(got) == sorted(expected_entities), set(got) ^ set(expected_entities)
    assert len(graph["entities"]) == len(expected_entities)
    for name, entity in expected_entities.items():
        assert got[name]["entityType"] == entity["entityType"], name
        assert got[name]["observations"] == entity["observations"], name
    assert triples(graph) == expected_relations
    assert len(graph["relations"]) == len(expected_relations)

    # The legacy file is only ever read: same bytes, same owner and mode, next to the new database.
    with created(docker_client, image, volumes=data_volume(volume), command=["--version"]) as helper:
        after, info = get_file(helper, "/data/memory.jsonl")
        _, db_info = get_file(helper, DB)
    assert hashlib.sha256(after).hexdigest() == hashlib.sha256(data).hexdigest()
    assert (info.uid, info.gid, info.mode & 0o7777) == (UID, UID, 0o644)
    assert (db_info.uid, db_info.gid) == (UID, UID)

    # A second start finds a non-empty database and does not import again.
    with stdio_server(docker_client, image, volume) as again:
        again.initialize()
        code = again.end()
        assert code == 0
        assert "legacy_import_started" not in [line["event"] for line in again.stderr_lines()]
    stats = database_state(docker_client, image, volume)
    observations = sum(len(e["observations"]) for e in expected_entities.values())
    assert (stats["entities"], stats["relations"], stats["observations"]) == (
        len(expected_entities), len(expected_relations), observations)


SHADOWS = {
    # Python would import these first if /data (the working directory and HOME) were on sys.path,
    # or if user site-packages under HOME=/data were enabled.
    "graph_memory/__init__.py": b"raise SystemExit('shadowed: graph_memory imported from /data')\n",
    "mcp/__init__.py": b"raise SystemExit('shadowed: mcp imported from /data')\n",
    "sitecustomize.py": b"raise SystemExit('shadowed: sitecustomize from /data')\n",
    "usercustomize.py": b"raise SystemExit('shadowed: usercustomize from /data')\n",
    ".local/lib/python3.11/site-packages/graph_memory/__init__.py": b"raise SystemExit('shadowed: user site')\n",
    ".local/lib/python3.12/site-packages/graph_memory/__init__.py": b"raise SystemExit('shadowed: user site')\n",
    # An old image that kept its SQL in the volume: never read as migrations.
    "migrations/0002_evil.sql": b"DROP TABLE entities;\n",
    "graph_memory/migrations/0002_evil.sql": b"DROP TABLE entities;\n",
    "graph_memory/db/migrations/0002_evil.sql": b"DROP TABLE entities;\n",
}


def test_volume_contents_never_shadow_the_image_code(docker_client: Any, image: str, volume: str) -> None:
    """Code and migrations live in the image, outside /data: a volume holding Python packages or
    SQL files (as one written by an older image, or by anyone, might) changes nothing."""
    with created(docker_client, image, volumes=data_volume(volume), command=["--version"]) as helper:
        put_files(helper, "/data", SHADOWS)

    with stdio_server(docker_client, image, volume) as session:
        session.initialize()
        session.call_tool("create_entities", {"entities": ENTITIES[:1]})
        assert names(session.call_tool("read_graph", {})) == ["Alice"]
        code = session.end()
        assert code == 0, session.stderr.decode("utf-8", "replace")
        assert b"shadowed" not in session.stderr

    stats = database_state(docker_client, image, volume)
    assert (stats["schema_version"], stats["entities"]) == (SCHEMA_VERSION, 1)
