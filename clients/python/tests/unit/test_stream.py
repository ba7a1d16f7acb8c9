"""`events.stream`: events as they arrive, reconnecting with Last-Event-ID
after a drop, and giving up only when retrying cannot help."""

from __future__ import annotations

import json
from typing import AsyncIterator, Iterator, List, Optional

import httpx
import pytest

import tocsin

from .conftest import Recorder, error, event_json, make_async_client, make_client


def sse(*ids: str) -> bytes:
    return b"".join(
        f"id: {i}\nevent: event\ndata: {json.dumps(event_json(id=i, title=f'event {i}'))}\n\n".encode()
        for i in ids
    )


def chunks(*parts: bytes, then: Optional[Exception] = None) -> Iterator[bytes]:
    yield from parts
    if then is not None:
        raise then


def stream_answer(*parts: bytes, then: Optional[Exception] = None) -> httpx.Response:
    return httpx.Response(
        200,
        headers={"Content-Type": "text/event-stream"},
        stream=_SyncStream(chunks(*parts, then=then)),
    )


class _SyncStream(httpx.SyncByteStream):
    def __init__(self, it: Iterator[bytes]) -> None:
        self._it = it

    def __iter__(self) -> Iterator[bytes]:
        return self._it


class _AsyncStream(httpx.AsyncByteStream):
    def __init__(self, parts: List[bytes], then: Optional[Exception]) -> None:
        self._parts, self._then = parts, then

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for part in self._parts:
            yield part
        if self._then is not None:
            raise self._then


def last_event_ids(recorder: Recorder) -> List[Optional[str]]:
    return [r.headers.get("last-event-id") for r in recorder.requests]


def test_a_dropped_connection_is_reopened_after_the_last_event_handed_out() -> None:
    recorder = Recorder(
        [
            stream_answer(sse("e1", "e2"), then=httpx.ReadError("reset")),
            stream_answer(sse("e3")),  # the server ends the response: reconnect
            error(401, "unknown key"),
        ]
    )
    client = make_client(recorder)
    seen = []
    with pytest.raises(tocsin.AuthenticationError):
        with client.events.stream(channel="payments") as stream:
            for event in stream:
                seen.append(event.id)
    assert seen == ["e1", "e2", "e3"]
    assert last_event_ids(recorder) == [None, "e2", "e3"]
    assert all(r.url.params["channel"] == "payments" for r in recorder.requests)
    assert all(r.headers["accept"] == "text/event-stream" for r in recorder.requests)
    assert stream.last_event_id == "e3"


def test_a_consumer_that_stops_early_resumes_after_what_it_was_given() -> None:
    recorder = Recorder([stream_answer(sse("e1", "e2"))])
    stream = make_client(recorder).events.stream()
    first = next(iter(stream))
    stream.close()
    assert first.id == "e1"
    assert stream.last_event_id == "e1"
    assert first.created_at.year == 2026 and first.notification.state == "queued"


def test_the_given_last_event_id_is_sent_on_the_first_connection() -> None:
    recorder = Recorder([httpx.Response(204)])
    stream = make_client(recorder).events.stream(last_event_id="e9")
    assert list(stream) == []  # 204: the server asks not to reconnect
    assert last_event_ids(recorder) == ["e9"]


def test_until_it_opens_once_a_stream_fails_like_any_call() -> None:
    recorder = Recorder([httpx.ConnectError("refused")] * 2)
    client = make_client(recorder, max_retries=1)
    with pytest.raises(tocsin.APIConnectionError):
        list(client.events.stream())
    assert len(recorder.requests) == 2


def test_once_open_it_keeps_reconnecting_beyond_max_retries() -> None:
    recorder = Recorder(
        [stream_answer(sse("e1"))]
        + [httpx.ConnectError("refused")] * 3
        + [error(429, headers={"Retry-After": "5"}), stream_answer(sse("e2")), error(403)]
    )
    client = make_client(recorder, max_retries=1)
    seen = []
    with pytest.raises(tocsin.PermissionDeniedError):
        for event in client.events.stream():
            seen.append(event.id)
    assert seen == ["e1", "e2"]
    assert last_event_ids(recorder)[1:6] == ["e1"] * 5
    sleeps = client.sleeps  # type: ignore[attr-defined]
    assert 5.0 in sleeps  # the 429's Retry-After
    assert sleeps[1] < sleeps[2] < sleeps[3]  # backoff grows over failures in a row


def test_an_answer_that_is_not_an_event_stream_is_not_retried() -> None:
    recorder = Recorder([httpx.Response(200, html="<html>login</html>")])
    with pytest.raises(tocsin.TocsinError, match="Expected an event stream"):
        list(make_client(recorder).events.stream())
    assert len(recorder.requests) == 1


def test_a_silent_connection_is_replaced() -> None:
    recorder = Recorder([stream_answer(sse("e1"), then=httpx.ReadTimeout("idle")), stream_answer(sse("e2")), error(401)])
    client = make_client(recorder)
    seen = []
    with pytest.raises(tocsin.AuthenticationError):
        for event in client.events.stream(idle_timeout=0.5):
            seen.append(event.id)
    assert seen == ["e1", "e2"]
    assert recorder.requests[0].extensions["timeout"]["read"] == 0.5


@pytest.mark.anyio
async def test_the_async_stream_reconnects_with_last_event_id() -> None:
    answers = [
        httpx.Response(200, headers={"Content-Type": "text/event-stream"}, stream=_AsyncStream([sse("e1")], httpx.ReadError("reset"))),
        httpx.Response(200, headers={"Content-Type": "text/event-stream"}, stream=_AsyncStream([sse("e2")], None)),
        error(401),
    ]
    recorder = Recorder(answers)
    client = make_async_client(recorder)
    seen = []
    with pytest.raises(tocsin.AuthenticationError):
        async with client.events.stream(channel="c") as stream:
            async for event in stream:
                seen.append(event.id)
    assert seen == ["e1", "e2"]
    assert last_event_ids(recorder) == [None, "e1", "e2"]
