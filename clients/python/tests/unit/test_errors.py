"""Error mapping: each status raises its class, with the status, the
server's message, the request id (in the message too) and the body."""

from __future__ import annotations

import httpx
import pytest

import tocsin

from .conftest import REQUEST_ID, Recorder, error, make_client, rate_limit_headers


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (400, tocsin.ValidationError),
        (401, tocsin.AuthenticationError),
        (403, tocsin.PermissionDeniedError),
        (404, tocsin.NotFoundError),
        (409, tocsin.ConflictError),
        (422, tocsin.ConflictError),
        (429, tocsin.RateLimitError),
        (500, tocsin.InternalServerError),
        (503, tocsin.InternalServerError),
    ],
)
def test_each_status_raises_its_class(status: int, cls: type) -> None:
    client = make_client(Recorder([error(status, "what went wrong")] * 3), max_retries=0)
    with pytest.raises(cls) as raised:
        client.channels.list()
    err = raised.value
    assert isinstance(err, tocsin.APIError) and isinstance(err, tocsin.TocsinError)
    assert err.status == status
    assert err.message == "what went wrong"
    assert err.request_id == REQUEST_ID
    assert REQUEST_ID in str(err)
    assert "what went wrong" in str(err)
    assert isinstance(err.body, dict) and err.body["error"] == "what went wrong"


def test_another_status_is_a_plain_api_error() -> None:
    client = make_client(Recorder([error(413, "too large")]))
    with pytest.raises(tocsin.APIError) as raised:
        client.events.create(channel_name="c", title="t")
    assert type(raised.value) is tocsin.APIError
    assert raised.value.status == 413


def test_a_validation_error_lists_each_fault_as_path_and_message() -> None:
    details = [
        {"path": ["channelName"], "message": "missing required field"},
        {"path": ["tags", 3], "message": "too long"},
        {"nonsense": True},
    ]
    client = make_client(Recorder([error(400, "validation failed", details=details)]))
    with pytest.raises(tocsin.ValidationError) as raised:
        client.events.create(channel_name="", title="t")
    assert raised.value.details == [
        (("channelName",), "missing required field"),
        (("tags", "3"), "too long"),
    ]
    path, message = raised.value.details[0]
    assert path == ("channelName",) and message == "missing required field"
    assert raised.value.details[0].path == ("channelName",)


def test_a_rate_limit_error_carries_the_rate_limit_and_retry_after() -> None:
    headers = {**rate_limit_headers(limit=100, remaining=0), "Retry-After": "12"}
    client = make_client(Recorder([error(429, "rate limit exceeded", headers=headers)]), max_retries=0)
    with pytest.raises(tocsin.RateLimitError) as raised:
        client.channels.list()
    assert raised.value.retry_after == 12.0
    assert raised.value.rate_limit.limit == 100
    assert raised.value.rate_limit.remaining == 0


def test_a_rate_limit_error_without_headers_still_has_a_rate_limit() -> None:
    answer = httpx.Response(429, json={"success": False, "error": "slow", "requestId": REQUEST_ID}, headers={"Retry-After": "3"})
    client = make_client(Recorder([answer]), max_retries=0)
    with pytest.raises(tocsin.RateLimitError) as raised:
        client.channels.list()
    assert raised.value.rate_limit.remaining == 0
    assert raised.value.rate_limit.reset_in == 3.0


def test_a_proxys_html_page_keeps_the_status_readable() -> None:
    answer = httpx.Response(502, text="<html>Bad Gateway</html>", headers={"X-Request-Id": "proxy-1"})
    client = make_client(Recorder([answer]), max_retries=0)
    with pytest.raises(tocsin.InternalServerError) as raised:
        client.channels.list()
    assert raised.value.message == "HTTP 502"
    assert raised.value.body == "<html>Bad Gateway</html>"
    assert raised.value.request_id == "proxy-1"
    assert "proxy-1" in str(raised.value)


def test_connection_and_timeout_errors_name_the_url_and_keep_the_cause() -> None:
    client = make_client(Recorder([httpx.ConnectError("refused")]), max_retries=0)
    with pytest.raises(tocsin.APIConnectionError) as raised:
        client.channels.list()
    assert not isinstance(raised.value, tocsin.APITimeoutError)
    assert "http://tocsin.test/v1/channels" in str(raised.value)
    assert isinstance(raised.value.__cause__, httpx.ConnectError)

    client = make_client(Recorder([httpx.ReadTimeout("slow")]), max_retries=0)
    with pytest.raises(tocsin.APITimeoutError) as timed_out:
        client.channels.list()
    assert isinstance(timed_out.value, tocsin.APIConnectionError)
    assert timed_out.value.url == "http://tocsin.test/v1/channels"


def test_a_success_status_without_an_envelope_is_refused() -> None:
    client = make_client(Recorder([httpx.Response(200, text="<html>login</html>")]))
    with pytest.raises(tocsin.TocsinError, match="not a Tocsin success envelope"):
        client.channels.list()
