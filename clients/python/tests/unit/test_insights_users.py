"""Insights, the users list, the event fields of history and LogSnag's
track (`timestamp`, `parser`, `url`), and `client.stream`'s insight
messages: what each call sends and what it reads back."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any, AsyncIterator, Iterator, List, Optional

import httpx
import pytest

import tocsin
from tocsin.types import Event, Identity, Insight, InsightDeleted, User

from .conftest import (
    Recorder,
    envelope,
    error,
    event_json,
    identity_json,
    insight_json,
    make_async_client,
    make_client,
    user_json,
)


def keys(recorder: Recorder) -> List[Optional[str]]:
    return [request.headers.get("idempotency-key") for request in recorder.requests]


# ---------------------------------------------------------------- insights


def test_set_posts_title_value_and_icon_and_reports_created_or_updated() -> None:
    recorder = Recorder([envelope(insight_json(), 201), envelope(insight_json(value=1300), 200)])
    client = make_client(recorder)
    created = client.insights.set(title="Revenue today", value=1250, icon="💰")
    request = recorder.requests[0]
    assert (request.method, request.url.path) == ("POST", "/v1/insights")
    assert recorder.body(0) == {"title": "Revenue today", "value": 1250, "icon": "💰"}
    uuid.UUID(request.headers["idempotency-key"])  # a POST always carries one
    assert created.status_code == 201
    assert created.data == Insight(
        title="Revenue today",
        value=1250,
        icon="💰",
        created_at=datetime(2026, 11, 22, 10, tzinfo=timezone.utc),
        updated_at=datetime(2026, 11, 22, 10, tzinfo=timezone.utc),
    )
    updated = client.insights.set(title="Revenue today", value=1300)
    assert recorder.body(1) == {"title": "Revenue today", "value": 1300}, "no icon: the insight keeps its own"
    assert updated.status_code == 200 and updated.data.value == 1300


@pytest.mark.parametrize("value", ["green", True, False, 12.5, 0])
def test_set_sends_strings_booleans_and_numbers_as_json(value: Any) -> None:
    recorder = Recorder([envelope(insight_json(value=value), 200)])
    result = make_client(recorder).insights.set(title="t", value=value)
    assert recorder.body()["value"] == value and type(recorder.body()["value"]) is type(value)
    assert result.data.value == value and type(result.data.value) is type(value)


def test_increment_patches_with_inc_and_carries_one_idempotency_key_across_retries() -> None:
    recorder = Recorder([error(503), httpx.ConnectError("refused"), envelope(insight_json(value=3), 200)])
    client = make_client(recorder)
    result = client.insights.increment(title="Active trials", by=-1, icon=":test_tube:")
    assert [r.method for r in recorder.requests] == ["PATCH"] * 3
    assert recorder.requests[0].url.path == "/v1/insights"
    assert recorder.body(0) == {"title": "Active trials", "value": {"$inc": -1}, "icon": ":test_tube:"}
    sent = keys(recorder)
    assert sent[0] is not None and sent == [sent[0]] * 3, "a retried increment adds once"
    uuid.UUID(sent[0])
    assert result.data.value == 3


def test_increment_sends_the_callers_key() -> None:
    recorder = Recorder([envelope(insight_json(), 201)])
    make_client(recorder).insights.increment(title="t", by=1, idempotency_key="signup-42")
    assert keys(recorder) == ["signup-42"]


def test_incrementing_a_string_is_a_validation_error_at_value_and_is_not_retried() -> None:
    details = [{"path": ["value"], "message": "cannot increment this insight: its value is a string, not a number"}]
    recorder = Recorder([error(400, "validation failed", details=details)])
    with pytest.raises(tocsin.ValidationError) as raised:
        make_client(recorder).insights.increment(title="Build", by=1)
    assert [detail.path for detail in raised.value.details] == [("value",)]
    assert len(recorder.requests) == 1


def test_a_409_without_retry_after_is_the_insight_limit_and_is_not_retried() -> None:
    recorder = Recorder([error(409, "the project has 100 insights, the most it may have")])
    client = make_client(recorder)
    with pytest.raises(tocsin.ConflictError) as raised:
        client.insights.set(title="one too many", value=1)
    assert raised.value.status == 409 and "100 insights" in raised.value.message
    assert len(recorder.requests) == 1 and keys(recorder)[0] is not None
    assert client.sleeps == []  # type: ignore[attr-defined]


def test_list_gets_every_insight() -> None:
    recorder = Recorder([envelope({"insights": [insight_json(), insight_json(title="Build", value="green", icon=None)]})])
    result = make_client(recorder).insights.list(timeout=2.0)
    assert (recorder.requests[0].method, recorder.requests[0].url.path) == ("GET", "/v1/insights")
    assert "idempotency-key" not in recorder.requests[0].headers
    assert [(i.title, i.value, i.icon) for i in result.data.insights] == [("Revenue today", 1250, "💰"), ("Build", "green", None)]


def test_delete_encodes_the_title_and_an_unknown_one_is_not_found() -> None:
    deleted = {"title": "EU / revenue? #1", "deleted": True, "deletedAt": "2026-11-22T10:00:00Z"}
    recorder = Recorder([envelope(deleted), error(404, "no insight with this title")])
    client = make_client(recorder)
    result = client.insights.delete("EU / revenue? #1")
    assert recorder.requests[0].method == "DELETE"
    assert recorder.requests[0].url.raw_path == b"/v1/insights/EU%20%2F%20revenue%3F%20%231"
    assert result.data == InsightDeleted("EU / revenue? #1", True, datetime(2026, 11, 22, 10, tzinfo=timezone.utc))
    with pytest.raises(tocsin.NotFoundError):
        client.insights.delete("gone")
    with pytest.raises(tocsin.TocsinError, match="title must be a non-empty string"):
        client.insights.delete("")
    assert len(recorder.requests) == 2


@pytest.mark.anyio
async def test_the_async_insights_send_the_same() -> None:
    recorder = Recorder(
        [
            envelope(insight_json(), 201),
            error(500),
            envelope(insight_json(value=2), 200),
            envelope({"insights": []}),
            envelope({"title": "t", "deleted": True, "deletedAt": "2026-11-22T10:00:00Z"}),
        ]
    )
    client = make_async_client(recorder)
    assert (await client.insights.set(title="t", value=1, idempotency_key="k")).status_code == 201
    assert (await client.insights.increment(title="t", by=1)).data.value == 2
    assert (await client.insights.list()).data.insights == []
    assert (await client.insights.delete("t")).data.deleted is True
    assert [r.method for r in recorder.requests] == ["POST", "PATCH", "PATCH", "GET", "DELETE"]
    sent = keys(recorder)
    assert sent[0] == "k" and sent[1] is not None and sent[1] == sent[2] and sent[3:] == [None, None]


def test_an_idempotency_key_on_a_call_that_is_idempotent_by_itself_is_refused() -> None:
    from tocsin._operation import call
    from tocsin._request import RequestOptions, build_request

    client = make_client(Recorder([]))
    spec = call("deleteInsight", dict, path={"title": "t"})
    with pytest.raises(tocsin.TocsinError, match="POST calls and insights.increment only, not DELETE"):
        build_request(client._http, client._config, spec, RequestOptions(idempotency_key="k"))


def test_request_sends_a_given_key_with_any_method() -> None:
    recorder = Recorder([envelope(insight_json()), envelope({"insights": []})])
    client = make_client(recorder)
    client.request("PATCH", "/v1/insights", body={"title": "t", "value": {"$inc": 1}}, idempotency_key="k1")
    client.request("GET", "/v1/insights")
    assert keys(recorder) == ["k1", None]


# ------------------------------------------------------------------- users


def test_users_list_sends_the_filters_and_reads_the_counters() -> None:
    recorder = Recorder([envelope({"items": [user_json()], "nextCursor": "c2"})])
    page = make_client(recorder).users.list(q="ada", property="plan:pro", limit=20, cursor="c1")
    request = recorder.requests[0]
    assert (request.method, request.url.path) == ("GET", "/v1/users")
    assert dict(request.url.params) == {"q": "ada", "property": "plan:pro", "limit": "20", "cursor": "c1"}
    (user,) = page.data.items
    assert isinstance(user, User)
    assert (user.user_id, user.properties, user.aliases, user.event_count) == ("user_7", {"plan": "pro"}, ["ada@example.com"], 4)
    assert user.first_seen_at == datetime(2026, 11, 20, 9, 30, tzinfo=timezone.utc)
    assert page.data.next_cursor == "c2"


def test_users_list_all_follows_the_cursors_with_the_same_filters() -> None:
    recorder = Recorder(
        [
            envelope({"items": [user_json(userId="u3"), user_json(userId="u2")], "nextCursor": "c2"}),
            envelope({"items": [user_json(userId="u1")], "nextCursor": None}),
        ]
    )
    seen = [u.user_id for u in make_client(recorder).users.list_all(property="plan:pro", limit=2)]
    assert seen == ["u3", "u2", "u1"]
    assert [dict(r.url.params) for r in recorder.requests] == [
        {"property": "plan:pro", "limit": "2"},
        {"property": "plan:pro", "limit": "2", "cursor": "c2"},
    ]


def test_users_list_all_refuses_a_repeated_cursor() -> None:
    recorder = Recorder([envelope({"items": [], "nextCursor": "c1"})])
    with pytest.raises(tocsin.TocsinError, match="same cursor"):
        list(make_client(recorder).users.list_all(cursor="c1"))


def test_users_get_takes_an_alias_and_reads_the_counters() -> None:
    recorder = Recorder([envelope(identity_json(eventCount=7, firstSeenAt="2026-11-20T09:30:00Z"))])
    user = make_client(recorder).users.get("ada@example.com").data
    assert recorder.requests[0].url.raw_path == b"/v1/users/ada%40example.com"
    assert isinstance(user, Identity)
    assert (user.user_id, user.event_count) == ("user_7", 7)
    assert user.first_seen_at == datetime(2026, 11, 20, 9, 30, tzinfo=timezone.utc)


@pytest.mark.anyio
async def test_the_async_users_list_all_walks_every_page() -> None:
    recorder = Recorder(
        [
            envelope({"items": [user_json(userId="u2")], "nextCursor": "c2"}),
            envelope({"items": [user_json(userId="u1")], "nextCursor": None}),
        ]
    )
    client = make_async_client(recorder)
    assert [u.user_id async for u in client.users.list_all(q="u")] == ["u2", "u1"]
    assert [dict(r.url.params) for r in recorder.requests] == [{"q": "u"}, {"q": "u", "cursor": "c2"}]


# ------------------------------------------------------------ event fields


def test_create_sends_parser_url_and_icon_and_reads_the_rendered_description() -> None:
    answer = event_json(
        icon="💰", parser="markdown", description="**Refunded**", descriptionHtml="<p><strong>Refunded</strong></p>\n",
        url="https://billing.example.com/orders/1042",
    )  # fmt: skip
    recorder = Recorder([envelope(answer, 201)])
    event = make_client(recorder).events.create(
        channel_name="payments", title="Refund", description="**Refunded**", icon=":moneybag:",
        parser="markdown", url="https://billing.example.com/orders/1042",
    ).data  # fmt: skip
    assert recorder.body() == {
        "channelName": "payments", "title": "Refund", "description": "**Refunded**", "icon": ":moneybag:",
        "parser": "markdown", "url": "https://billing.example.com/orders/1042",
    }  # fmt: skip
    assert (event.icon, event.parser, event.url) == ("💰", "markdown", "https://billing.example.com/orders/1042")
    assert event.description_html == "<p><strong>Refunded</strong></p>\n"


@pytest.mark.parametrize(
    ("timestamp", "sent"),
    [
        (datetime(2026, 3, 1, 9, 30, 0, 123000, tzinfo=timezone.utc), "2026-03-01T09:30:00.123000Z"),
        (datetime(2026, 3, 1, 10, 30, tzinfo=timezone(timedelta(hours=1))), "2026-03-01T09:30:00Z"),
        ("2026-03-01T10:30:00+01:00", "2026-03-01T10:30:00+01:00"),
        (1772357400, 1772357400),
        (1772357400.5, 1772357400.5),
    ],
    ids=["aware-utc", "aware-offset", "rfc3339-string", "unix-int", "unix-float"],
)
def test_create_sends_a_timestamp_as_rfc3339_or_unix_seconds(timestamp: Any, sent: Any) -> None:
    recorder = Recorder([envelope(event_json(notify=False, createdAt="2026-03-01T09:30:00.123+00:00"), 201)])
    event = make_client(recorder).events.create(channel_name="c", title="t", timestamp=timestamp).data
    assert recorder.body()["timestamp"] == sent
    assert event.notify is False
    assert event.created_at == datetime(2026, 3, 1, 9, 30, 0, 123000, tzinfo=timezone.utc)


def test_a_naive_timestamp_is_refused_before_anything_is_sent() -> None:
    recorder = Recorder([])
    with pytest.raises(tocsin.TocsinError, match="timestamp must be a timezone-aware datetime"):
        make_client(recorder).events.create(channel_name="c", title="t", timestamp=datetime(2026, 3, 1, 9, 30))
    assert recorder.requests == []


# ------------------------------------------------------------------ stream


def frames(*parts: str) -> bytes:
    return "".join(parts).encode()


def event_frame(event_id: str) -> str:
    return f"id: {event_id}\nevent: event\ndata: {json.dumps(event_json(id=event_id))}\n\n"


def insight_frame(title: str, value: Any) -> str:
    return f"event: insight\ndata: {json.dumps(insight_json(title=title, value=value))}\n\n"


def deleted_frame(title: str) -> str:
    data = {"title": title, "deleted": True, "deletedAt": "2026-11-22T10:01:00Z"}
    return f"event: insight-deleted\ndata: {json.dumps(data)}\n\n"


class _Body(httpx.SyncByteStream):
    def __init__(self, parts: List[bytes]) -> None:
        self._parts = parts

    def __iter__(self) -> Iterator[bytes]:
        yield from self._parts


class _AsyncBody(httpx.AsyncByteStream):
    def __init__(self, parts: List[bytes]) -> None:
        self._parts = parts

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for part in self._parts:
            yield part


def sse_answer(*parts: bytes, asynchronous: bool = False) -> httpx.Response:
    body: Any = _AsyncBody(list(parts)) if asynchronous else _Body(list(parts))
    return httpx.Response(200, headers={"Content-Type": "text/event-stream"}, stream=body)


def test_client_stream_yields_events_insights_and_deletions_in_order() -> None:
    body = frames(
        event_frame("e1"), insight_frame("Revenue", 1250), "event: ping\ndata: {}\n\n",
        deleted_frame("Revenue"), event_frame("e2"),
    )  # fmt: skip
    recorder = Recorder([sse_answer(body), error(401)])
    client = make_client(recorder)
    seen: List[Any] = []
    with pytest.raises(tocsin.AuthenticationError):
        with client.stream(channel="payments") as stream:
            for message in stream:
                seen.append(message)
    assert [type(m).__name__ for m in seen] == ["Event", "Insight", "InsightDeleted", "Event"]
    assert isinstance(seen[1], Insight) and (seen[1].title, seen[1].value) == ("Revenue", 1250)
    assert isinstance(seen[2], InsightDeleted) and seen[2].deleted is True
    assert recorder.requests[0].url.path == "/v1/stream"
    assert recorder.requests[0].url.params["channel"] == "payments"
    assert stream.last_event_id == "e2"


def test_insight_messages_do_not_move_the_resume_point() -> None:
    first = frames(event_frame("e1"), insight_frame("Trials", 2), insight_frame("Trials", 3))
    recorder = Recorder([sse_answer(first), sse_answer(frames(event_frame("e2"))), error(403)])
    client = make_client(recorder)
    seen = []
    with pytest.raises(tocsin.PermissionDeniedError):
        with client.stream() as stream:
            for message in stream:
                seen.append(message)
                if isinstance(message, Insight):
                    assert stream.last_event_id == "e1"
    assert [r.headers.get("last-event-id") for r in recorder.requests] == [None, "e1", "e2"]


def test_events_stream_skips_insight_messages_even_unreadable_ones() -> None:
    body = frames(insight_frame("Revenue", 1), event_frame("e1"), "event: insight\ndata: {oops\n\n", deleted_frame("Revenue"), event_frame("e2"))
    recorder = Recorder([sse_answer(body), error(401)])
    seen = []
    with pytest.raises(tocsin.AuthenticationError):
        for event in make_client(recorder).events.stream():
            assert isinstance(event, Event)
            seen.append(event.id)
    assert seen == ["e1", "e2"]


def test_an_unreadable_insight_message_is_an_error_of_client_stream() -> None:
    recorder = Recorder([sse_answer(frames("event: insight\ndata: {oops\n\n"))])
    with pytest.raises(tocsin.TocsinError, match="insight message this client cannot read"):
        list(make_client(recorder).stream())


@pytest.mark.anyio
async def test_the_async_client_stream_yields_every_kind_of_message() -> None:
    body = frames(insight_frame("A", True), event_frame("e1"), deleted_frame("A"))
    recorder = Recorder([sse_answer(body, asynchronous=True), error(401)])
    client = make_async_client(recorder)
    seen: List[str] = []
    with pytest.raises(tocsin.AuthenticationError):
        async with client.stream() as stream:
            async for message in stream:
                seen.append(type(message).__name__)
    assert seen == ["Insight", "Event", "InsightDeleted"]
    assert stream.last_event_id == "e1"
