"""Insights, the users list, history and the event fields of LogSnag's
track, and `client.stream`'s insight messages, against a real ingest
process, with `Tocsin` and `AsyncTocsin`."""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from typing import Any, AsyncIterator, Iterator, List

import anyio
import httpx
import pytest

import tocsin
from tocsin.types import Event, Insight, InsightDeleted

from .conftest import Ingest, ingest_binary


@pytest.fixture(scope="module")
def roomy_key(ingest: Ingest) -> str:
    """A key of its own: the concurrent increments alone exceed the default
    100 requests a minute the session's key has."""
    return ingest.create_key(rate_limit=100_000)


@pytest.fixture
def client(ingest: Ingest, roomy_key: str) -> Iterator[tocsin.Tocsin]:
    with tocsin.Tocsin(roomy_key, base_url=ingest.base_url) as client:
        yield client


@pytest.fixture
async def aclient(ingest: Ingest, roomy_key: str) -> AsyncIterator[tocsin.AsyncTocsin]:
    async with tocsin.AsyncTocsin(roomy_key, base_url=ingest.base_url) as client:
        yield client


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def listed(client: tocsin.Tocsin, title: str) -> Insight:
    (insight,) = [i for i in client.insights.list().data.insights if i.title == title]
    return insight


# ---------------------------------------------------------------- insights


def test_set_creates_then_updates_and_keeps_the_icon(client: tocsin.Tocsin) -> None:
    title = unique("Revenue today")
    created = client.insights.set(title=title, value=1250, icon=":moneybag:")
    assert created.status_code == 201 and created.was_replayed is False
    assert (created.data.title, created.data.value, created.data.icon) == (title, 1250, "💰")
    assert isinstance(created.data.value, int), "an integer stays one"
    assert created.data.created_at == created.data.updated_at
    uuid.UUID(created.request_id)

    updated = client.insights.set(title=title, value=1300.5)
    assert updated.status_code == 200
    assert (updated.data.value, updated.data.icon) == (1300.5, "💰"), "an icon left out stays"
    assert updated.data.created_at == created.data.created_at
    assert client.insights.set(title=title, value="green").data.value == "green"
    assert client.insights.set(title=title, value=False).data.value is False


def test_increment_creates_then_adds(client: tocsin.Tocsin) -> None:
    title = unique("Active trials")
    first = client.insights.increment(title=title, by=2, icon="🧪")
    assert first.status_code == 201 and (first.data.value, first.data.icon) == (2, "🧪")
    second = client.insights.increment(title=title, by=-5)
    assert second.status_code == 200 and second.data.value == -3
    assert client.insights.increment(title=title, by=0.5).data.value == -2.5


def test_concurrent_increments_from_several_clients_add_up_exactly(ingest: Ingest, roomy_key: str) -> None:
    title = unique("Signups")
    clients = [tocsin.Tocsin(roomy_key, base_url=ingest.base_url) for _ in range(4)]
    try:
        clients[0].insights.set(title=title, value=0)
        amounts = [2 if i % 3 == 0 else 1 for i in range(60)]
        with ThreadPoolExecutor(max_workers=12) as pool:
            answers = list(
                pool.map(lambda i: clients[i % 4].insights.increment(title=title, by=amounts[i]), range(60))
            )
        values = sorted(answer.data.value for answer in answers)
        assert len(set(values)) == len(values), "each increment was applied on its own"
        assert values[-1] == sum(amounts)
        assert listed(clients[0], title).value == sum(amounts)
    finally:
        for c in clients:
            c.close()


def test_an_increment_repeated_with_its_key_is_replayed_not_added(client: tocsin.Tocsin) -> None:
    title = unique("Orders")
    key = unique("order-1042")
    first = client.insights.increment(title=title, by=1, idempotency_key=key)
    again = client.insights.increment(title=title, by=1, idempotency_key=key)
    assert (first.was_replayed, again.was_replayed) == (False, True)
    assert again.data == first.data
    assert listed(client, title).value == 1


def test_incrementing_a_string_is_a_validation_error_at_value(ingest: Ingest, roomy_key: str, client: tocsin.Tocsin) -> None:
    title = unique("Build")
    client.insights.set(title=title, value="green")
    sent: List[httpx.Request] = []
    with httpx.Client(event_hooks={"request": [sent.append]}) as http:
        counted = tocsin.Tocsin(roomy_key, base_url=ingest.base_url, http_client=http)
        with pytest.raises(tocsin.ValidationError) as raised:
            counted.insights.increment(title=title, by=1)
    assert raised.value.status == 400 and raised.value.request_id
    assert [detail.path for detail in raised.value.details] == [("value",)]
    assert "string" in raised.value.details[0].message
    assert [request.method for request in sent] == ["PATCH"], "a 400 is not retried"
    assert listed(client, title).value == "green", "nothing changed"


def test_list_keeps_the_order_of_creation_and_delete_removes(client: tocsin.Tocsin) -> None:
    titles = [unique("List a"), unique("List b / ?#%")]
    for title in titles:
        client.insights.set(title=title, value=1)
    client.insights.increment(title=titles[0], by=1)  # a change does not move it
    assert [i.title for i in client.insights.list().data.insights if i.title in titles] == titles

    deleted = client.insights.delete(titles[1])
    assert deleted.status_code == 200
    assert isinstance(deleted.data, InsightDeleted)
    assert (deleted.data.title, deleted.data.deleted) == (titles[1], True)
    assert abs(deleted.data.deleted_at - datetime.now(timezone.utc)) < timedelta(minutes=1)
    assert titles[1] not in [i.title for i in client.insights.list().data.insights]
    with pytest.raises(tocsin.NotFoundError) as raised:
        client.insights.delete(titles[1])
    assert "insight" in raised.value.message


def test_a_projects_101st_insight_is_a_conflict_not_retried() -> None:
    server = Ingest(ingest_binary())  # a project of its own, to fill
    try:
        key = server.create_key(rate_limit=100_000)
        sent: List[httpx.Request] = []
        with httpx.Client(event_hooks={"request": [sent.append]}) as http:
            client = tocsin.Tocsin(key, base_url=server.base_url, http_client=http)
            for i in range(100):
                client.insights.set(title=f"Filler {i}", value=i)
            sent.clear()
            with pytest.raises(tocsin.ConflictError) as raised:
                client.insights.set(title="One too many", value=1)
            assert raised.value.status == 409 and "100 insights" in raised.value.message
            assert len(sent) == 1, "no Retry-After: nothing in flight to wait for"
    finally:
        server.stop()


# ------------------------------------------------------------------- users


@pytest.fixture(scope="module")
def five_users(ingest: Ingest, roomy_key: str) -> List[str]:
    """Five users seen one after another (the last is the most recently
    seen), each with one event; plan pro for the even ones."""
    prefix = unique("py-users")
    ids = []
    with tocsin.Tocsin(roomy_key, base_url=ingest.base_url) as client:
        for i in range(5):
            user_id = f"{prefix}-{i}"
            ids.append(user_id)
            client.identify(
                user_id=user_id, properties={"plan": "pro" if i % 2 == 0 else "free", "seats": i},
                aliases=[f"{user_id}@example.com"],
            )  # fmt: skip
            client.events.create(channel_name="py-users", title=f"Signed in {i}", user_id=user_id, notify=False)
    return ids


def test_users_list_pages_most_recently_seen_first(client: tocsin.Tocsin, five_users: List[str]) -> None:
    prefix = five_users[0].rsplit("-", 1)[0]
    first = client.users.list(q=prefix, limit=2)
    assert first.status_code == 200
    assert [u.user_id for u in first.data.items] == five_users[::-1][:2]
    assert first.data.next_cursor is not None
    second = client.users.list(q=prefix, limit=2, cursor=first.data.next_cursor)
    assert [u.user_id for u in second.data.items] == five_users[::-1][2:4]
    assert [u.user_id for u in client.users.list_all(q=prefix, limit=2)] == five_users[::-1]

    (user,) = client.users.list(q=five_users[2]).data.items
    assert (user.properties, user.aliases, user.event_count) == ({"plan": "pro", "seats": 2}, [f"{five_users[2]}@example.com"], 1)
    assert user.first_seen_at <= user.last_seen_at


def test_users_list_filters_by_q_and_property(client: tocsin.Tocsin, five_users: List[str]) -> None:
    prefix = five_users[0].rsplit("-", 1)[0]
    assert [u.user_id for u in client.users.list_all(q=f"{five_users[3]}@EXAMPLE")] == [five_users[3]]
    assert [u.user_id for u in client.users.list_all(q=prefix, property="plan:pro")] == [five_users[i] for i in (4, 2, 0)]
    assert [u.user_id for u in client.users.list_all(q=prefix, property="seats:3")] == [five_users[3]]
    with pytest.raises(tocsin.ValidationError) as raised:
        client.users.list(property="plan")
    assert ("query", "property") in [detail.path for detail in raised.value.details]


def test_users_get_by_alias_answers_the_user_with_its_counters(client: tocsin.Tocsin, five_users: List[str]) -> None:
    user = client.users.get(f"{five_users[1]}@example.com").data
    assert (user.user_id, user.event_count, user.properties) == (five_users[1], 1, {"plan": "free", "seats": 1})
    (listed_user,) = client.users.list(q=five_users[1]).data.items
    assert (user.first_seen_at, user.last_seen_at) == (listed_user.first_seen_at, listed_user.last_seen_at)


# ------------------------------------------------------ history and fields


def test_an_event_with_a_datetime_timestamp_is_history_at_that_time(client: tocsin.Tocsin) -> None:
    channel, user_id = unique("py-history"), unique("py-history-user")
    at = (datetime.now(timezone.utc) - timedelta(days=3)).replace(microsecond=123000)
    event = client.events.create(channel_name=channel, title="Imported", timestamp=at, notify=True, user_id=user_id).data
    assert event.created_at == at
    assert event.notify is False, "history is never pushed, whatever notify says"
    assert event.notification.state == "skipped"
    now = client.events.create(channel_name=channel, title="Now", notify=False, user_id=user_id).data
    assert [e.id for e in client.events.list_all(channel=channel)] == [now.id, event.id], "listed at its time"
    user = client.users.get(user_id).data
    assert user.first_seen_at == at and user.event_count == 2

    seconds = int(time.time()) - 3600
    assert client.events.create(channel_name=channel, title="Seconds", timestamp=seconds).data.created_at == datetime.fromtimestamp(seconds, timezone.utc)
    text = client.events.create(channel_name=channel, title="Text", timestamp="2026-01-01T01:00:00+01:00").data
    assert text.created_at == datetime(2026, 1, 1, tzinfo=timezone.utc)
    with pytest.raises(tocsin.ValidationError) as raised:
        client.events.create(channel_name=channel, title="Future", timestamp=datetime.now(timezone.utc) + timedelta(hours=1))
    assert ("timestamp",) in [detail.path for detail in raised.value.details]
    with pytest.raises(tocsin.TocsinError, match="timezone-aware"):
        client.events.create(channel_name=channel, title="Naive", timestamp=datetime.now())


def test_a_shortcode_markdown_and_a_url_come_back_as_the_service_stores_them(client: tocsin.Tocsin) -> None:
    event = client.events.create(
        channel_name="py-fields", title="Refund", icon=":moneybag:", parser="markdown",
        description="**Refunded** <script>alert(1)</script>", url="https://billing.example.com/orders/1042",
        notify=False,
    ).data  # fmt: skip
    assert (event.icon, event.parser, event.url) == ("💰", "markdown", "https://billing.example.com/orders/1042")
    assert event.description_html is not None and "<strong>Refunded</strong>" in event.description_html
    assert "<script" not in event.description_html
    assert client.events.get(event.id).data.description_html == event.description_html
    plain = client.events.create(channel_name="py-fields", title="Plain", description="**as is**", notify=False).data
    assert (plain.parser, plain.description_html, plain.url) == ("text", None, None)
    with pytest.raises(tocsin.ValidationError) as raised:
        client.events.create(channel_name="py-fields", title="t", icon=":no_such_emoji:", url="ftp://example.com/x")
    paths = [detail.path for detail in raised.value.details]
    assert ("icon",) in paths and ("url",) in paths


# ------------------------------------------------------------------ stream


def test_client_stream_yields_insight_changes_and_events(client: tocsin.Tocsin) -> None:
    channel, title = unique("py-live"), unique("Live revenue")
    done: List[Any] = []

    def later() -> None:
        time.sleep(0.5)
        client.insights.set(title=title, value=10, icon="💰")
        client.insights.increment(title=title, by=5)
        client.insights.delete(title)
        done.append(client.events.create(channel_name=channel, title="After the insights", notify=False).data)

    writer = threading.Thread(target=later, daemon=True)
    writer.start()
    seen: List[Any] = []
    with client.stream(channel=channel) as stream:
        for message in stream:
            # Insight changes go to every stream: skip other tests' insights.
            if isinstance(message, Event) or message.title == title:
                seen.append(message)
            if isinstance(message, Event):
                break
    kinds = [type(m).__name__ for m in seen]
    assert kinds[0] == "Insight" and kinds[-2:] == ["InsightDeleted", "Event"], kinds
    insights = [m for m in seen if isinstance(m, Insight)]
    assert insights[-1].value == 15, "the latest value arrived (a poll may fold changes together)"
    # The stream may show the event before its POST has returned.
    writer.join(timeout=10)
    assert seen[-1].id == done[0].id
    assert stream.last_event_id == done[0].id


# ------------------------------------------------------------------- async



@pytest.mark.anyio
async def test_the_async_client_sets_increments_lists_and_deletes(aclient: tocsin.AsyncTocsin) -> None:
    title = unique("Async trials")
    assert (await aclient.insights.set(title=title, value=1, icon=":test_tube:")).status_code == 201
    results = []

    async def bump() -> None:
        results.append((await aclient.insights.increment(title=title, by=1)).data.value)

    async with anyio.create_task_group() as tasks:
        for _ in range(20):
            tasks.start_soon(bump)
    assert sorted(results) == list(range(2, 22))
    (insight,) = [i for i in (await aclient.insights.list()).data.insights if i.title == title]
    assert (insight.value, insight.icon) == (21, "🧪")
    with pytest.raises(tocsin.ValidationError):
        await aclient.insights.set(title=title, value="")
    assert (await aclient.insights.delete(title)).data.deleted is True
    with pytest.raises(tocsin.NotFoundError):
        await aclient.insights.delete(title)


@pytest.mark.anyio
async def test_the_async_users_list_all_and_history(aclient: tocsin.AsyncTocsin, five_users: List[str]) -> None:
    prefix = five_users[0].rsplit("-", 1)[0]
    assert [u.user_id async for u in aclient.users.list_all(q=prefix, limit=2)] == five_users[::-1]
    at = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(hours=5)
    event = (await aclient.events.create(channel_name="py-async-history", title="Then", timestamp=at)).data
    assert (event.created_at, event.notify) == (at, False)


@pytest.mark.anyio
async def test_the_async_client_stream_yields_an_insight(aclient: tocsin.AsyncTocsin) -> None:
    title = unique("Async live")
    seen: List[Any] = []

    async def later() -> None:
        await anyio.sleep(0.5)
        await aclient.insights.set(title=title, value=True)

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(later)
            async with aclient.stream() as stream:
                async for message in stream:
                    if isinstance(message, Insight) and message.title == title:
                        seen.append(message)
                        break
    assert [m.value for m in seen] == [True]
