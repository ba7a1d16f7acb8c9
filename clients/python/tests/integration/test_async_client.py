"""`AsyncTocsin` against a real ingest process: every method, awaited."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from typing import AsyncIterator

import anyio
import pytest

import tocsin

from .conftest import VAPID_PUBLIC_KEY, Ingest

pytestmark = pytest.mark.anyio

APNS_TOKEN = "b2" * 32


@pytest.fixture
async def client(ingest: Ingest, api_key: str) -> AsyncIterator[tocsin.AsyncTocsin]:
    async with tocsin.AsyncTocsin(api_key, base_url=ingest.base_url) as client:
        yield client


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def test_events_create_get_and_replay(client: tocsin.AsyncTocsin) -> None:
    key = unique("it-async")
    created = await client.events.create(
        channel_name="it-async", title="Async", tags=["a"], metadata={"n": 1}, user_id="u1",
        notify=False, priority="low", idempotency_key=key,
    )  # fmt: skip
    assert created.status_code == 201 and created.was_replayed is False
    assert (created.data.channel_name, created.data.priority, created.data.metadata) == ("it-async", "low", {"n": 1})
    assert client.last_rate_limit == created.rate_limit is not None
    replay = await client.events.create(
        channel_name="it-async", title="Async", tags=["a"], metadata={"n": 1}, user_id="u1",
        notify=False, priority="low", idempotency_key=key,
    )  # fmt: skip
    assert replay.was_replayed is True and replay.data == created.data
    fetched = await client.events.get(created.data.id)
    assert fetched.data.id == created.data.id
    with pytest.raises(tocsin.NotFoundError):
        await client.events.get(str(uuid.uuid4()))


async def test_events_list_and_list_all(client: tocsin.AsyncTocsin) -> None:
    channel = unique("it-async-list")
    ids = [(await client.events.create(channel_name=channel, title=f"n{i}", notify=False)).data.id for i in range(3)]
    page = await client.events.list(channel=channel, limit=2)
    assert [e.id for e in page.data.items] == ids[::-1][:2]
    assert [e.id async for e in client.events.list_all(channel=channel, limit=2)] == ids[::-1]


async def test_events_stream_replays_then_goes_live(client: tocsin.AsyncTocsin) -> None:
    channel = unique("it-async-stream")
    first = (await client.events.create(channel_name=channel, title="before", notify=False)).data
    await client.events.create(channel_name=channel, title="missed", notify=False)
    titles = []

    async def later() -> None:
        await anyio.sleep(0.5)
        await client.events.create(channel_name=channel, title="live", notify=False)

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(later)
            async with client.events.stream(channel=channel, last_event_id=first.id) as stream:
                async for event in stream:
                    titles.append(event.title)
                    if len(titles) == 2:
                        break
    assert titles == ["missed", "live"]
    assert stream.last_event_id is not None and stream.last_event_id != first.id


async def test_identify_users_channels_and_stats(client: tocsin.AsyncTocsin) -> None:
    user_id = unique("async-user")
    identity = await client.identify(user_id=user_id, properties={"plan": "team"}, aliases=["x@example.com"])
    assert identity.data.user_id == user_id
    assert (await client.users.get(user_id)).data.properties == {"plan": "team"}
    with pytest.raises(tocsin.NotFoundError):
        await client.users.get(unique("nobody"))

    channel = unique("it-async-channel")
    await client.events.create(channel_name=channel, title="t", notify=False)
    names = [c.name for c in (await client.channels.list()).data.items]
    assert channel in names
    stats = await client.stats.events(channel=channel, since=datetime.now(timezone.utc) - timedelta(hours=2))
    assert sum(b.count for b in stats.data.buckets) == 1


async def test_devices_create_list_delete_and_webpush_key(client: tocsin.AsyncTocsin) -> None:
    device = (await client.devices.create(token=APNS_TOKEN, environment="production")).data
    assert device.kind == "apns" and device.environment == "production"
    assert device.id in {d.id for d in (await client.devices.list()).data.devices}
    assert (await client.devices.delete(device.id)).data.deleted is True
    with pytest.raises(tocsin.NotFoundError):
        await client.devices.delete(device.id)
    assert (await client.devices.webpush_key()).data.public_key == VAPID_PUBLIC_KEY


async def test_devices_update_changes_keeps_and_clears(client: tocsin.AsyncTocsin) -> None:
    device = (await client.devices.create(token="d4" * 32, environment="sandbox", tags=["eu"], min_priority="normal")).data
    try:
        updated = (await client.devices.update(device.id, burst={"max": 2, "perMinutes": 1}, tags=None)).data
        assert updated.burst is not None and (updated.burst.max, updated.burst.per_minutes) == (2, 1)
        assert (updated.tags, updated.min_priority) == (None, "normal")
        with pytest.raises(tocsin.ValidationError) as raised:
            await client.devices.update(
                device.id, quiet_hours={"start": "22:00", "end": "07:00", "timeZone": "Mars/Olympus"}
            )
        assert raised.value.details[0].path == ("quietHours", "timeZone")
    finally:
        await client.devices.delete(device.id)
    with pytest.raises(tocsin.NotFoundError):
        await client.devices.update(device.id, name="gone")


async def test_errors_are_the_same_classes(ingest: Ingest, client: tocsin.AsyncTocsin) -> None:
    with pytest.raises(tocsin.ValidationError) as raised:
        await client.events.create(channel_name="c", title="")
    assert ("title",) in [d.path for d in raised.value.details]
    async with tocsin.AsyncTocsin("tk_unknown", base_url=ingest.base_url) as stranger:
        with pytest.raises(tocsin.AuthenticationError) as denied:
            await stranger.channels.list()
    assert denied.value.request_id and denied.value.request_id in str(denied.value)


async def test_request_calls_any_route(client: tocsin.AsyncTocsin) -> None:
    result = await client.request("GET", "/v1/devices")
    assert isinstance(result.data["devices"], list) and result.request_id
