"""A device's alert rules: what `devices.create` and `devices.update` send
(an update tells a field left out from one cleared with None), how the rules
and a delivery's reason and recipient are read back, and how an update is
retried."""

from __future__ import annotations

import json

import pytest

import tocsin
from tocsin import NOT_GIVEN, NotGiven
from tocsin.types import BurstRule, BurstRuleParam, Delivery, QuietHours, QuietHoursParam

from .conftest import Recorder, device_json, envelope, error, event_json, make_async_client, make_client

DEVICE_ID = "0197a3c2-5f1e-7b8a-9c0d-1e2f3a4b5c6d"
DESTINATION_ID = "0197a3c2-6a2b-8c3d-9e4f-5a6b7c8d9e0f"
QUIET: QuietHoursParam = {"start": "22:00", "end": "07:00", "timeZone": "Europe/Berlin"}
BURST: BurstRuleParam = {"max": 5, "perMinutes": 10}
RULES = {
    "tags": ["eu"],
    "minPriority": "normal",
    "quietHours": {**QUIET, "allowPriority": "high"},
    "burst": BURST,
}


def test_create_sends_the_rules_in_the_apis_names() -> None:
    recorder = Recorder([envelope(device_json(**RULES), 201)])
    make_client(recorder).devices.create(
        token="a1" * 32, environment="sandbox", tags=("eu",), min_priority="normal", quiet_hours=QUIET, burst=BURST
    )
    assert recorder.body() == {
        "token": "a1" * 32,
        "environment": "sandbox",
        "tags": ["eu"],
        "minPriority": "normal",
        "quietHours": QUIET,
        "burst": {"max": 5, "perMinutes": 10},
    }


def test_a_devices_rules_are_read_into_dataclasses() -> None:
    recorder = Recorder([envelope({"devices": [device_json(**RULES), device_json()]})])
    ruled, plain = make_client(recorder).devices.list().data.devices
    assert ruled.tags == ["eu"] and ruled.min_priority == "normal"
    assert ruled.quiet_hours == QuietHours(start="22:00", end="07:00", time_zone="Europe/Berlin", allow_priority="high")
    assert ruled.burst == BurstRule(max=5, per_minutes=10)
    assert (plain.tags, plain.min_priority, plain.quiet_hours, plain.burst) == (None, "low", None, None)


def test_update_sends_patch_with_only_the_given_fields() -> None:
    recorder = Recorder([envelope(device_json(minPriority="high"))])
    result = make_client(recorder).devices.update(DEVICE_ID, min_priority="high")
    request = recorder.requests[0]
    assert (request.method, request.url.raw_path) == ("PATCH", f"/v1/devices/{DEVICE_ID}".encode())
    assert request.headers["content-type"] == "application/json"
    assert "idempotency-key" not in request.headers
    # Left out means "keep": name, channels, tags… must not go out as null.
    assert recorder.body() == {"minPriority": "high"}
    assert result.data.min_priority == "high" and result.status_code == 200


def test_update_sends_none_as_null_to_clear_a_field() -> None:
    recorder = Recorder([envelope(device_json())])
    make_client(recorder).devices.update(
        DEVICE_ID, name=None, channels=None, tags=None, min_priority=None, quiet_hours=None, burst=None
    )
    assert json.loads(recorder.requests[0].content) == {
        "name": None,
        "channels": None,
        "tags": None,
        "minPriority": None,
        "quietHours": None,
        "burst": None,
    }


def test_update_takes_every_field_and_any_sequence_of_names() -> None:
    recorder = Recorder([envelope(device_json())])
    quiet: QuietHoursParam = {**QUIET, "allowPriority": None}
    make_client(recorder).devices.update(
        DEVICE_ID, name="Pager", channels=("ops",), tags=("eu", "card"), min_priority="normal", quiet_hours=quiet, burst=BURST
    )
    assert recorder.body() == {
        "name": "Pager",
        "channels": ["ops"],
        "tags": ["eu", "card"],
        "minPriority": "normal",
        "quietHours": {**QUIET, "allowPriority": None},
        "burst": BURST,
    }


def test_an_update_without_changes_sends_an_empty_object() -> None:
    recorder = Recorder([envelope(device_json())])
    make_client(recorder).devices.update(DEVICE_ID)
    assert recorder.requests[0].content == b"{}"


def test_not_given_passed_explicitly_is_left_out() -> None:
    recorder = Recorder([envelope(device_json())])
    make_client(recorder).devices.update(DEVICE_ID, name=NOT_GIVEN, tags=None)
    assert recorder.body() == {"tags": None}


def test_not_given_is_falsy_and_says_what_it_is() -> None:
    assert not NOT_GIVEN
    assert repr(NOT_GIVEN) == "NOT_GIVEN"
    assert isinstance(NOT_GIVEN, NotGiven) and not isinstance(None, NotGiven)


def test_create_still_leaves_out_what_is_none() -> None:
    # Registering has no "clear": None there means the service's default.
    recorder = Recorder([envelope(device_json(), 201)])
    make_client(recorder).devices.create(token="a1" * 32, environment="sandbox", tags=None, quiet_hours=None)
    assert recorder.body() == {"token": "a1" * 32, "environment": "sandbox"}


def test_update_encodes_the_id_and_refuses_an_empty_one() -> None:
    recorder = Recorder([envelope(device_json())])
    client = make_client(recorder)
    client.devices.update("a/b c", name="x")
    assert recorder.requests[0].url.raw_path == b"/v1/devices/a%2Fb%20c"
    with pytest.raises(tocsin.TocsinError, match="non-empty"):
        client.devices.update("", name="x")
    assert len(recorder.requests) == 1


def test_update_of_an_unknown_device_is_not_found_and_not_retried() -> None:
    recorder = Recorder([error(404, "no device with this id")])
    with pytest.raises(tocsin.NotFoundError, match="no device with this id"):
        make_client(recorder).devices.update(DEVICE_ID, min_priority="high")
    assert len(recorder.requests) == 1


def test_a_bad_value_is_a_validation_error_with_its_path() -> None:
    details = [{"path": ["quietHours", "timeZone"], "message": "not an IANA time zone name"}]
    recorder = Recorder([error(400, "validation failed", details=details)])
    with pytest.raises(tocsin.ValidationError) as raised:
        make_client(recorder).devices.update(DEVICE_ID, quiet_hours={**QUIET, "timeZone": "Mars/Olympus"})
    assert [detail.path for detail in raised.value.details] == [("quietHours", "timeZone")]
    assert len(recorder.requests) == 1


def test_a_failed_update_is_retried_with_the_same_body_and_no_idempotency_key() -> None:
    recorder = Recorder([error(503), envelope(device_json(tags=None))])
    client = make_client(recorder)
    client.devices.update(DEVICE_ID, tags=None, burst=BURST)
    first, second = recorder.requests
    assert first.content == second.content == b'{"tags":null,"burst":{"max":5,"perMinutes":10}}'
    assert "idempotency-key" not in first.headers and "idempotency-key" not in second.headers
    assert len(client.sleeps) == 1  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_the_async_update_sends_the_same() -> None:
    recorder = Recorder([envelope(device_json(minPriority="low"))])
    result = await make_async_client(recorder).devices.update(DEVICE_ID, min_priority=None, name="Pager")
    assert recorder.requests[0].method == "PATCH"
    assert recorder.body() == {"minPriority": None, "name": "Pager"}
    assert result.data.min_priority == "low"


def test_events_carry_an_alert_key_and_deliveries_their_reason() -> None:
    delivery = {
        "deviceId": DEVICE_ID, "state": "filtered", "reason": "priority", "summaryId": None,
        "attempts": 0, "error": None, "provider": None, "updatedAt": "2026-11-22T10:00:01Z",
    }  # fmt: skip
    created = event_json(alertKey="deploy-42")
    looked_up = event_json(alertKey="deploy-42", notification={"state": "skipped", "deliveries": [delivery]})
    recorder = Recorder([envelope(created, 201), envelope(looked_up)])
    client = make_client(recorder)
    event = client.events.create(channel_name="deploys", title="Deploy 42 started", alert_key="deploy-42").data
    assert recorder.body(0) == {"channelName": "deploys", "title": "Deploy 42 started", "alertKey": "deploy-42"}
    assert event.alert_key == "deploy-42"
    deliveries = client.events.get(event.id).data.notification.deliveries
    assert deliveries is not None
    (read,) = deliveries
    assert isinstance(read, Delivery)
    assert (read.state, read.reason, read.summary_id, read.attempts) == ("filtered", "priority", None, 0)
    assert (read.device_id, read.destination_id) == (DEVICE_ID, None)


def test_a_delivery_names_a_device_or_a_destination() -> None:
    """Each delivery names one recipient: `deviceId` for a device's push,
    `destinationId` for a destination's message; the other is None."""
    common = {"reason": None, "summaryId": None, "attempts": 1, "error": None, "updatedAt": "2026-11-22T10:00:01Z"}
    push = {"deviceId": DEVICE_ID, "state": "delivered", "provider": "apns", **common}
    message = {"destinationId": DESTINATION_ID, "state": "delivered", "provider": "slack", **common}
    looked_up = event_json(notification={"state": "delivered", "deliveries": [push, message]})
    client = make_client(Recorder([envelope(looked_up)]))
    deliveries = client.events.get("evt_1").data.notification.deliveries
    assert deliveries is not None
    read_push, read_message = deliveries
    assert (read_push.device_id, read_push.destination_id, read_push.provider) == (DEVICE_ID, None, "apns")
    assert (read_message.device_id, read_message.destination_id, read_message.provider) == (
        None, DESTINATION_ID, "slack"
    )  # fmt: skip
