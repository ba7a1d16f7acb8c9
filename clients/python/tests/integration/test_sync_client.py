"""`Tocsin` against a real ingest process: every method, the errors the
service really sends, idempotent replays and the live stream."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, List

import httpx
import pytest

import tocsin
from tocsin.types import BurstRule, Delivery, Device, Event, QuietHours, QuietHoursParam

from .conftest import VAPID_PUBLIC_KEY, Ingest, free_port, ingest_binary

APNS_TOKEN = "a1" * 32


def full_event(title: str, channel: str = "it-payments") -> Dict[str, Any]:
    return dict(
        channel_name=channel,
        title=title,
        description="Card declined",
        icon="💸",
        tags=["eu", "card"],
        metadata={"amount": 1999, "currency": "EUR"},
        user_id="user_7",
        notify=False,
        source="integration-test",
        priority="high",
    )


@pytest.fixture
def client(ingest: Ingest, api_key: str) -> Any:
    with tocsin.Tocsin(api_key, base_url=ingest.base_url) as client:
        yield client


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_events_create_records_every_field_and_reports_the_call(client: tocsin.Tocsin) -> None:
    assert client.last_rate_limit is None
    result = client.events.create(**full_event("Payment failed"))
    event = result.data
    assert result.status_code == 201
    assert isinstance(event, Event)
    assert (event.channel_name, event.title, event.description) == ("it-payments", "Payment failed", "Card declined")
    assert (event.icon, event.tags, event.metadata) == ("💸", ["eu", "card"], {"amount": 1999, "currency": "EUR"})
    assert (event.user_id, event.notify, event.source, event.priority) == ("user_7", False, "integration-test", "high")
    assert abs(event.created_at - datetime.now(timezone.utc)) < timedelta(minutes=1)
    assert event.notification.state in ("pending", "queued", "delivered", "failed", "skipped")
    uuid.UUID(result.request_id)
    assert result.was_replayed is False
    rate_limit = result.rate_limit
    assert rate_limit is not None and rate_limit.limit > 0 and rate_limit.remaining < rate_limit.limit
    assert rate_limit.reset > time.time() - 1 and 0 <= rate_limit.reset_in <= 3600
    assert client.last_rate_limit == rate_limit


def test_left_out_fields_get_the_services_defaults(client: tocsin.Tocsin) -> None:
    event = client.events.create(channel_name="it-minimal", title="Minimal", notify=False).data
    assert (event.description, event.icon, event.user_id, event.source) == (None, None, None, None)
    assert (event.tags, event.priority) == ([], "normal")


def test_the_same_idempotency_key_replays_the_first_answer(client: tocsin.Tocsin) -> None:
    key = unique("it-replay")
    first = client.events.create(**full_event("Replay"), idempotency_key=key)
    second = client.events.create(**full_event("Replay"), idempotency_key=key)
    assert (first.was_replayed, second.was_replayed) == (False, True)
    assert second.data == first.data
    assert second.status_code == 201


def test_a_key_reused_with_another_body_is_a_conflict_and_not_retried(ingest: Ingest, api_key: str) -> None:
    sent: List[httpx.Request] = []
    http = httpx.Client(event_hooks={"request": [sent.append]})
    client = tocsin.Tocsin(api_key, base_url=ingest.base_url, http_client=http)
    key = unique("it-mismatch")
    client.events.create(**full_event("one"), idempotency_key=key)
    with pytest.raises(tocsin.ConflictError) as raised:
        client.events.create(**full_event("two"), idempotency_key=key)
    assert raised.value.status == 422
    assert raised.value.request_id and raised.value.request_id in str(raised.value)
    assert len(sent) == 2
    http.close()


def test_events_get_returns_the_event_with_its_notification(client: tocsin.Tocsin) -> None:
    created = client.events.create(**full_event("Get me")).data
    result = client.events.get(created.id)
    assert result.data.id == created.id and result.data.title == "Get me"
    assert result.data.notification.deliveries == []
    with pytest.raises(tocsin.NotFoundError) as raised:
        client.events.get(str(uuid.uuid4()))
    assert raised.value.status == 404 and raised.value.request_id in str(raised.value)


def test_events_list_pages_and_list_all_walks_them(client: tocsin.Tocsin) -> None:
    channel = unique("it-list")
    ids = [client.events.create(channel_name=channel, title=f"n{i}", notify=False).data.id for i in range(5)]
    page = client.events.list(channel=channel, limit=2)
    assert [e.id for e in page.data.items] == ids[::-1][:2]  # newest first
    assert page.data.next_cursor is not None
    second = client.events.list(channel=channel, limit=2, cursor=page.data.next_cursor)
    assert [e.id for e in second.data.items] == ids[::-1][2:4]
    assert [e.id for e in client.events.list_all(channel=channel, limit=2)] == ids[::-1]
    found = list(client.events.list_all(channel=channel, q="N3", since=datetime.now(timezone.utc) - timedelta(hours=1)))
    assert [e.title for e in found] == ["n3"]


def test_events_stream_replays_after_the_last_event_id_then_goes_live(ingest: Ingest, client: tocsin.Tocsin) -> None:
    channel = unique("it-stream")
    first = client.events.create(channel_name=channel, title="before", notify=False).data
    missed = client.events.create(channel_name=channel, title="missed", notify=False).data

    def later() -> None:
        time.sleep(0.5)
        client.events.create(channel_name=channel, title="live", notify=False)
        client.events.create(channel_name="it-other-channel", title="elsewhere", notify=False)
        client.events.create(channel_name=channel, title="live 2", notify=False)

    threading.Thread(target=later, daemon=True).start()
    titles = []
    with client.events.stream(channel=channel, last_event_id=first.id) as stream:
        for event in stream:
            titles.append(event.title)
            if len(titles) == 3:
                break
    assert titles == ["missed", "live", "live 2"]
    assert stream.last_event_id not in (None, first.id, missed.id)


def test_the_stream_survives_a_server_restart_without_losing_an_event(api_key: str) -> None:
    server = Ingest(ingest_binary())
    try:
        key = server.create_key()
        writer = tocsin.Tocsin(key, base_url=server.base_url, max_retries=5)
        reader = tocsin.Tocsin(key, base_url=server.base_url)

        def later() -> None:
            time.sleep(0.5)
            writer.events.create(channel_name="c", title="before restart", notify=False)
            time.sleep(0.5)
            server.restart()
            writer.events.create(channel_name="c", title="after restart", notify=False)

        threading.Thread(target=later, daemon=True).start()
        titles = []
        with reader.events.stream(channel="c") as stream:
            for event in stream:
                titles.append(event.title)
                if len(titles) == 2:
                    break
        assert titles == ["before restart", "after restart"]
    finally:
        server.stop()


def test_identify_and_users_get(client: tocsin.Tocsin) -> None:
    user_id = unique("user") + "/with space"
    created = client.identify(user_id=user_id, properties={"plan": "pro"}, aliases=["ada@example.com"])
    assert created.data.user_id == user_id and created.data.properties == {"plan": "pro"}
    client.identify(user_id=user_id, properties={"seats": 3})
    user = client.users.get(user_id).data
    assert user.properties == {"plan": "pro", "seats": 3}
    assert user.aliases == ["ada@example.com"]
    assert user.updated_at >= user.created_at
    with pytest.raises(tocsin.NotFoundError):
        client.users.get(unique("nobody"))


def test_channels_list_counts_events(client: tocsin.Tocsin) -> None:
    channel = unique("it-channel")
    for _ in range(2):
        client.events.create(channel_name=channel, title="t", notify=False)
    channels = {c.name: c for c in client.channels.list().data.items}
    assert channels[channel].event_count == 2
    assert channels[channel].last_event_at is not None


def test_stats_events_counts_per_bucket(client: tocsin.Tocsin) -> None:
    channel = unique("it-stats")
    client.events.create(channel_name=channel, title="t", notify=False)
    stats = client.stats.events(channel=channel, bucket="hour").data
    assert sum(b.count for b in stats.buckets) == 1
    assert stats.buckets == sorted(stats.buckets, key=lambda b: b.start)
    days = client.stats.events(channel=channel, bucket="day", since=datetime.now(timezone.utc) - timedelta(days=3))
    assert len(days.data.buckets) in (3, 4) and sum(b.count for b in days.data.buckets) == 1


def test_devices_create_list_delete(client: tocsin.Tocsin) -> None:
    created = client.devices.create(token=APNS_TOKEN, environment="sandbox", name="On-call iPhone", channels=["payments"])
    device = created.data
    assert created.status_code == 201
    assert (device.kind, device.token, device.environment, device.name) == ("apns", APNS_TOKEN, "sandbox", "On-call iPhone")
    assert device.channels == ["payments"] and device.active is True
    again = client.devices.create(token=APNS_TOKEN, environment="sandbox")
    assert again.status_code == 200 and again.data.id == device.id

    fcm = client.devices.create(kind="fcm", token=unique("fcm-token")).data
    assert (fcm.kind, fcm.environment) == ("fcm", None)

    listed = {d.id for d in client.devices.list().data.devices}
    assert {device.id, fcm.id} <= listed
    deleted = client.devices.delete(device.id).data
    assert (deleted.id, deleted.deleted) == (device.id, True)
    client.devices.delete(fcm.id)
    with pytest.raises(tocsin.NotFoundError):
        client.devices.delete(device.id)
    assert device.id not in {d.id for d in client.devices.list().data.devices}


@pytest.fixture
def ruled_device(client: tocsin.Tocsin) -> Any:
    """A device registered with every alert rule, deleted afterwards (the
    session's other tests push their events to every device left)."""
    device = client.devices.create(
        token="c3" * 32, environment="sandbox", name="IT rules", channels=["it-rules"], tags=["eu", "card"],
        min_priority="normal", quiet_hours=QUIET_HOURS, burst={"max": 5, "perMinutes": 10},
    ).data  # fmt: skip
    yield device
    with contextlib.suppress(tocsin.NotFoundError):
        client.devices.delete(device.id)


QUIET_HOURS: QuietHoursParam = {"start": "22:00", "end": "07:00", "timeZone": "Europe/Berlin"}


def test_devices_create_stores_the_rules_and_list_shows_them(client: tocsin.Tocsin, ruled_device: Device) -> None:
    assert (ruled_device.tags, ruled_device.min_priority) == (["eu", "card"], "normal")
    assert ruled_device.quiet_hours == QuietHours("22:00", "07:00", "Europe/Berlin", allow_priority="high")
    assert ruled_device.burst == BurstRule(max=5, per_minutes=10)
    listed = [d for d in client.devices.list().data.devices if d.id == ruled_device.id]
    assert listed == [ruled_device]

    plain = client.devices.create(token="c4" * 32, environment="sandbox").data
    client.devices.delete(plain.id)
    assert (plain.tags, plain.min_priority, plain.quiet_hours, plain.burst) == (None, "low", None, None)


def test_devices_update_changes_what_it_is_given_and_keeps_the_rest(
    client: tocsin.Tocsin, ruled_device: Device
) -> None:
    result = client.devices.update(ruled_device.id, min_priority="high")
    assert result.status_code == 200
    updated = result.data
    assert updated.min_priority == "high"
    assert dataclasses.replace(updated, min_priority="normal", updated_at=ruled_device.updated_at) == ruled_device
    assert [d for d in client.devices.list().data.devices if d.id == updated.id] == [updated], "stored, not only answered"


def test_devices_update_with_none_clears_a_rule(client: tocsin.Tocsin, ruled_device: Device) -> None:
    cleared = client.devices.update(ruled_device.id, tags=None, min_priority=None, quiet_hours=None, burst=None).data
    assert (cleared.tags, cleared.min_priority, cleared.quiet_hours, cleared.burst) == (None, "low", None, None)
    assert (cleared.name, cleared.channels) == ("IT rules", ["it-rules"]), "left out, so kept"
    strict = client.devices.update(ruled_device.id, quiet_hours={**QUIET_HOURS, "allowPriority": None}).data
    assert strict.quiet_hours is not None and strict.quiet_hours.allow_priority is None


def test_an_event_below_a_devices_minimum_priority_is_filtered_for_it(
    client: tocsin.Tocsin, ruled_device: Device
) -> None:
    client.devices.update(ruled_device.id, min_priority="high")
    event = client.events.create(channel_name="it-rules", title="Quiet one", tags=["eu"], priority="low").data
    deadline = time.monotonic() + 30
    mine: List[Delivery] = []
    while not mine and time.monotonic() < deadline:  # the notifier records it shortly after
        deliveries = client.events.get(event.id).data.notification.deliveries or []
        mine = [d for d in deliveries if d.device_id == ruled_device.id]
        time.sleep(0.1)
    assert mine, "the device's delivery was recorded"
    (delivery,) = mine
    assert (delivery.state, delivery.reason, delivery.summary_id, delivery.attempts) == ("filtered", "priority", None, 0)
    assert delivery.destination_id is None, "a device's delivery names no destination"


def test_devices_update_of_an_unknown_id_is_not_found_and_not_retried(ingest: Ingest, api_key: str) -> None:
    sent: List[httpx.Request] = []
    with httpx.Client(event_hooks={"request": [sent.append]}) as http:
        client = tocsin.Tocsin(api_key, base_url=ingest.base_url, http_client=http)
        with pytest.raises(tocsin.NotFoundError) as raised:
            client.devices.update(str(uuid.uuid4()), min_priority="high")
    assert raised.value.status == 404 and raised.value.request_id
    assert [request.method for request in sent] == ["PATCH"]


def test_devices_update_with_an_unknown_time_zone_names_the_field(client: tocsin.Tocsin, ruled_device: Device) -> None:
    with pytest.raises(tocsin.ValidationError) as raised:
        client.devices.update(ruled_device.id, name="Not applied", quiet_hours={**QUIET_HOURS, "timeZone": "Mars/Olympus"})
    assert ("quietHours", "timeZone") in [detail.path for detail in raised.value.details]
    assert [d for d in client.devices.list().data.devices if d.id == ruled_device.id] == [ruled_device], "nothing changed"


def test_devices_webpush_key_serves_the_servers_vapid_key(client: tocsin.Tocsin) -> None:
    assert client.devices.webpush_key().data.public_key == VAPID_PUBLIC_KEY


def test_a_validation_error_names_the_faulty_fields(client: tocsin.Tocsin) -> None:
    with pytest.raises(tocsin.ValidationError) as raised:
        client.events.create(channel_name="", title="t", priority="urgent")  # type: ignore[arg-type]
    paths = [path for path, _ in raised.value.details]
    assert ("channelName",) in paths and ("priority",) in paths
    with pytest.raises(tocsin.ValidationError) as bad_limit:
        client.events.list(limit=500)
    assert bad_limit.value.details[0].path == ("query", "limit")


def test_an_unknown_key_is_an_authentication_error(ingest: Ingest) -> None:
    with tocsin.Tocsin("tk_not_a_key", base_url=ingest.base_url) as client:
        with pytest.raises(tocsin.AuthenticationError) as raised:
            client.channels.list()
    assert raised.value.status == 401


def test_a_key_without_the_scope_is_permission_denied(ingest: Ingest) -> None:
    key = ingest.create_key(scopes=["events:write"])
    with tocsin.Tocsin(key, base_url=ingest.base_url) as client:
        client.events.create(channel_name="it-scoped", title="may write", notify=False)
        with pytest.raises(tocsin.PermissionDeniedError) as raised:
            client.events.list()
    assert "events:read" in raised.value.message


def test_an_exhausted_rate_limit_is_a_rate_limit_error(ingest: Ingest) -> None:
    key = ingest.create_key(rate_limit=1)
    with tocsin.Tocsin(key, base_url=ingest.base_url, max_retries=0) as client:
        client.channels.list()
        with pytest.raises(tocsin.RateLimitError) as raised:
            client.channels.list()
    err = raised.value
    assert err.status == 429 and err.rate_limit.remaining == 0 and err.rate_limit.limit == 1
    assert err.retry_after is not None and err.retry_after > 0
    assert client.last_rate_limit == err.rate_limit


def test_nothing_listening_is_a_connection_error_after_the_retries(api_key: str) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with tocsin.Tocsin(api_key, base_url=url, max_retries=1) as client:
        client._sleep = lambda _: None
        with pytest.raises(tocsin.APIConnectionError) as raised:
            client.channels.list()
    assert url in str(raised.value)


def test_request_calls_any_route_and_returns_its_raw_data(client: tocsin.Tocsin) -> None:
    channel = unique("it-raw")
    created = client.request("POST", "/v1/events", body={"channelName": channel, "title": "raw", "notify": False})
    assert created.status_code == 201 and created.data["channelName"] == channel
    listed = client.request("GET", "/v1/events", query={"channel": channel})
    assert [e["id"] for e in listed.data["items"]] == [created.data["id"]]
