"""The rate limit: read from the X-RateLimit-* headers into every result,
and kept by the client as the last one known."""

from __future__ import annotations

import time

import httpx
import pytest

import tocsin
from tocsin._rate_limit import parse_rate_limit, parse_retry_after

from .conftest import Recorder, envelope, error, make_async_client, make_client, rate_limit_headers


def test_every_result_carries_the_rate_limit_request_id_and_replay_flag() -> None:
    reset = int(time.time()) + 30
    answer = envelope({"items": []}, headers={**rate_limit_headers(100, 42, reset), "X-Idempotent-Replay": "true"})
    result = make_client(Recorder([answer])).channels.list()
    assert result.rate_limit is not None
    assert (result.rate_limit.limit, result.rate_limit.remaining, result.rate_limit.reset) == (100, 42, reset)
    assert 28 <= result.rate_limit.reset_in <= 30
    assert result.was_replayed is True
    assert result.request_id
    assert result.status_code == 200


def test_a_fresh_answer_is_not_a_replay() -> None:
    result = make_client(Recorder([envelope({"items": []})])).channels.list()
    assert result.was_replayed is False


def test_last_rate_limit_is_none_before_the_first_answer_then_follows_every_answer() -> None:
    recorder = Recorder(
        [
            envelope({"items": []}, headers=rate_limit_headers(remaining=9)),
            error(404, headers=rate_limit_headers(remaining=8)),
        ]
    )
    client = make_client(recorder)
    assert client.last_rate_limit is None
    client.channels.list()
    assert client.last_rate_limit is not None and client.last_rate_limit.remaining == 9
    with pytest.raises(tocsin.NotFoundError) as raised:
        client.events.get("missing")
    assert client.last_rate_limit.remaining == 8
    assert raised.value.rate_limit == client.last_rate_limit


@pytest.mark.anyio
async def test_the_async_client_keeps_the_last_rate_limit_too() -> None:
    client = make_async_client(Recorder([envelope({"items": []}, headers=rate_limit_headers(remaining=5))]))
    assert client.last_rate_limit is None
    result = await client.channels.list()
    assert client.last_rate_limit == result.rate_limit
    assert result.rate_limit is not None and result.rate_limit.remaining == 5


def test_a_missing_or_bad_header_means_no_rate_limit_rather_than_half_of_one() -> None:
    assert parse_rate_limit(httpx.Headers({"X-RateLimit-Limit": "100", "X-RateLimit-Remaining": "1"})) is None
    headers = httpx.Headers({**rate_limit_headers(), "X-RateLimit-Reset": "soon"})
    assert parse_rate_limit(headers) is None


def test_reset_in_is_never_negative() -> None:
    limit = parse_rate_limit(httpx.Headers(rate_limit_headers(reset=1000)), now=2000.0)
    assert limit is not None and limit.reset_in == 0.0


def test_retry_after_reads_seconds_and_http_dates() -> None:
    assert parse_retry_after(httpx.Headers({"Retry-After": "3"})) == 3.0
    now = 1_700_000_000.0
    date = "Tue, 14 Nov 2023 22:13:30 GMT"  # now + 10 s
    assert parse_retry_after(httpx.Headers({"Retry-After": date}), now=now) == 10.0
    assert parse_retry_after(httpx.Headers({"Retry-After": "whenever"})) is None
    assert parse_retry_after(httpx.Headers({})) is None
