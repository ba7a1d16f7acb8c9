"""Retries: which failures are retried, how long the client waits, and the
one Idempotency-Key every attempt of a POST carries."""

from __future__ import annotations

import uuid

import httpx
import pytest

import tocsin
from tocsin._retry import INITIAL_DELAY, JITTER, MAX_DELAY, MAX_RETRY_AFTER, backoff_delay

from .conftest import Recorder, envelope, error, event_json, make_async_client, make_client


def keys(recorder: Recorder) -> list:
    return [request.headers.get("idempotency-key") for request in recorder.requests]


@pytest.mark.parametrize(
    "failure",
    [
        httpx.ConnectError("refused"),
        httpx.ReadTimeout("slow"),
        error(500, "boom"),
        error(502, "bad gateway"),
        error(503, "unavailable"),
        error(429, "slow down", headers={"Retry-After": "2"}),
        error(409, "in flight", headers={"Retry-After": "0"}),
    ],
    ids=["connect", "timeout", "500", "502", "503", "429", "409"],
)
def test_a_retryable_failure_is_retried_and_every_attempt_sends_the_same_generated_key(failure: object) -> None:
    recorder = Recorder([failure, failure, envelope(event_json(), 201)])
    client = make_client(recorder)
    result = client.events.create(channel_name="payments", title="Payment failed")
    assert result.data.id == event_json()["id"]
    assert len(recorder.requests) == 3
    sent = keys(recorder)
    assert sent[0] is not None and sent == [sent[0]] * 3
    uuid.UUID(sent[0])  # a random UUID made by the client


def test_the_callers_idempotency_key_is_sent_on_every_retry() -> None:
    recorder = Recorder([error(503), envelope(event_json(), 201)])
    client = make_client(recorder)
    client.events.create(channel_name="c", title="t", idempotency_key="order-1042-failed")
    assert keys(recorder) == ["order-1042-failed", "order-1042-failed"]


def test_two_calls_get_two_different_generated_keys() -> None:
    recorder = Recorder([envelope(event_json(), 201), envelope(event_json(), 201)])
    client = make_client(recorder)
    client.events.create(channel_name="c", title="t")
    client.events.create(channel_name="c", title="t")
    first, second = keys(recorder)
    assert first and second and first != second


def test_a_get_carries_no_idempotency_key_and_is_retried_too() -> None:
    recorder = Recorder([httpx.ConnectError("refused"), envelope({"items": []})])
    client = make_client(recorder)
    client.channels.list()
    assert keys(recorder) == [None, None]


def test_retries_stop_after_max_retries_and_raise_the_last_error() -> None:
    recorder = Recorder([error(500), error(502), error(503, "still down")])
    client = make_client(recorder, max_retries=2)
    with pytest.raises(tocsin.InternalServerError) as raised:
        client.events.create(channel_name="c", title="t")
    assert raised.value.status == 503
    assert len(recorder.requests) == 3
    assert len(client.sleeps) == 2  # type: ignore[attr-defined]


def test_max_retries_zero_makes_one_attempt() -> None:
    recorder = Recorder([httpx.ConnectError("refused")])
    client = make_client(recorder, max_retries=0)
    with pytest.raises(tocsin.APIConnectionError):
        client.channels.list()
    assert len(recorder.requests) == 1


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 415, 422])
def test_errors_that_fail_every_time_are_not_retried(status: int) -> None:
    recorder = Recorder([error(status)])
    client = make_client(recorder)
    with pytest.raises(tocsin.APIError):
        client.events.create(channel_name="c", title="t")
    assert len(recorder.requests) == 1


def test_a_409_without_an_idempotency_key_is_a_real_conflict_and_not_retried() -> None:
    recorder = Recorder([error(409)])
    client = make_client(recorder)
    with pytest.raises(tocsin.ConflictError):
        client.devices.delete("d1")
    assert len(recorder.requests) == 1


def test_429_waits_the_retry_after_the_server_sent() -> None:
    recorder = Recorder([error(429, headers={"Retry-After": "7"}), envelope({"items": []})])
    client = make_client(recorder)
    client.channels.list()
    assert client.sleeps == [7.0]  # type: ignore[attr-defined]


def test_a_huge_retry_after_is_capped() -> None:
    recorder = Recorder([error(429, headers={"Retry-After": "86400"}), envelope({"items": []})])
    client = make_client(recorder)
    client.channels.list()
    assert client.sleeps == [MAX_RETRY_AFTER]  # type: ignore[attr-defined]


def test_backoff_doubles_from_half_a_second_less_up_to_a_quarter_of_jitter() -> None:
    recorder = Recorder([error(500)] * 4 + [envelope({"items": []})])
    client = make_client(recorder, max_retries=4)
    client.channels.list()
    sleeps = client.sleeps  # type: ignore[attr-defined]
    for retry, slept in enumerate(sleeps):
        base = min(INITIAL_DELAY * 2**retry, MAX_DELAY)
        assert base * (1 - JITTER) <= slept <= base, (retry, slept)
    assert sleeps == sorted(sleeps)


def test_backoff_is_jittered_and_capped() -> None:
    assert backoff_delay(0, rand=lambda: 0.0) == INITIAL_DELAY
    assert backoff_delay(0, rand=lambda: 1.0) == INITIAL_DELAY * (1 - JITTER)
    assert backoff_delay(20, rand=lambda: 0.0) == MAX_DELAY


@pytest.mark.anyio
async def test_the_async_client_retries_with_one_key_too() -> None:
    recorder = Recorder([httpx.ConnectError("refused"), error(503), envelope(event_json(), 201)])
    client = make_async_client(recorder)
    result = await client.events.create(channel_name="c", title="t")
    assert result.status_code == 201
    sent = keys(recorder)
    assert sent[0] is not None and sent == [sent[0]] * 3
    assert len(client.sleeps) == 2  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_the_async_client_gives_up_after_max_retries() -> None:
    recorder = Recorder([error(429, headers={"Retry-After": "1"})] * 2)
    client = make_async_client(recorder, max_retries=1)
    with pytest.raises(tocsin.RateLimitError):
        await client.channels.list()
    assert client.sleeps == [1.0]  # type: ignore[attr-defined]
