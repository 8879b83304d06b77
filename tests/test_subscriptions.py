"""Change notifications reach every subscribed session, on both protocol generations."""

from __future__ import annotations

import warnings
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from helpers import call

pytestmark = [pytest.mark.anyio, pytest.mark.both_backends]
URI = "memory://knowledge-graph"
QUIET = 0.3  # seconds to wait before concluding that no notification is coming


class Inbox:
    """Collects resources/updated notifications a legacy client receives."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self.arrived = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.uris.append(str(message.params.uri))
            self.arrived.set()

    async def expect_one(self) -> None:
        with anyio.fail_after(5):
            await self.arrived.wait()
        assert self.uris == [URI]

    async def expect_none(self) -> None:
        await anyio.sleep(QUIET)
        assert self.uris == []


async def subscribe_legacy(server: Any, inbox: Inbox) -> Any:
    client = Client(server, mode="legacy", message_handler=inbox)
    await client.__aenter__()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        await client.subscribe_resource(URI)
    return client


async def test_second_legacy_session_is_notified_of_first_sessions_mutation(server: Any) -> None:
    inbox = Inbox()
    watcher = await subscribe_legacy(server, inbox)
    try:
        async with Client(server, mode="legacy") as writer:
            await call(writer, "create_entities", {"entities": [{"name": "A", "entityType": "t", "observations": []}]})
            await inbox.expect_one()
    finally:
        await watcher.__aexit__(None, None, None)


async def test_legacy_subscriber_gets_nothing_for_a_no_op(server: Any) -> None:
    async with Client(server, mode="legacy") as writer:
        await call(writer, "create_entities", {"entities": [{"name": "A", "entityType": "t", "observations": []}]})
        inbox = Inbox()
        watcher = await subscribe_legacy(server, inbox)
        try:
            # Each of these changes nothing: existing entity, unknown deletions, reads.
            await call(writer, "create_entities", {"entities": [{"name": "A", "entityType": "t", "observations": []}]})
            await call(writer, "delete_entities", {"entityNames": ["missing"]})
            await call(writer, "delete_relations", {"relations": [{"from": "A", "to": "A", "relationType": "x"}]})
            await call(writer, "add_observations", {"observations": [{"entityName": "A", "contents": []}]})
            await call(writer, "read_graph", {})
            await inbox.expect_none()
        finally:
            await watcher.__aexit__(None, None, None)


async def test_unsubscribed_legacy_session_is_not_notified(server: Any) -> None:
    inbox = Inbox()
    watcher = await subscribe_legacy(server, inbox)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await watcher.unsubscribe_resource(URI)
        async with Client(server, mode="legacy") as writer:
            await call(writer, "create_entities", {"entities": [{"name": "A", "entityType": "t", "observations": []}]})
        await inbox.expect_none()
    finally:
        await watcher.__aexit__(None, None, None)


async def test_modern_listen_stream_is_notified_of_another_sessions_mutation(server: Any) -> None:
    from mcp.client.subscriptions import ResourceUpdated

    async with Client(server) as watcher, Client(server) as writer, \
            watcher.listen(resource_subscriptions=[URI]) as sub:
        await call(writer, "add_observations", {"observations": []})  # no-op first
        await call(writer, "create_entities", {"entities": [{"name": "A", "entityType": "t", "observations": []}]})
        with anyio.fail_after(5):
            event = await sub.__aiter__().__anext__()
        assert isinstance(event, ResourceUpdated) and event.uri == URI


async def test_modern_mutation_reaches_legacy_subscriber(server: Any) -> None:
    inbox = Inbox()
    watcher = await subscribe_legacy(server, inbox)
    try:
        async with Client(server) as writer:
            await call(writer, "delete_entities", {"entityNames": ["nothing"]})
            await inbox.expect_none()
            await call(writer, "create_entities", {"entities": [{"name": "B", "entityType": "t", "observations": []}]})
            await inbox.expect_one()
    finally:
        await watcher.__aexit__(None, None, None)


async def test_server_advertises_resource_subscriptions(legacy_client: Any) -> None:
    caps = legacy_client.server_capabilities
    assert caps.resources is not None and caps.resources.subscribe is True
