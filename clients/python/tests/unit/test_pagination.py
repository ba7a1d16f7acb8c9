"""`events.list` is one page; `events.list_all` walks every page, lazily."""

from __future__ import annotations

from typing import List

import pytest

import tocsin

from .conftest import Recorder, envelope, event_json, make_async_client, make_client


def page(ids: List[str], next_cursor: object) -> object:
    return envelope({"items": [event_json(id=i) for i in ids], "nextCursor": next_cursor})


def test_list_is_one_page_with_its_cursor() -> None:
    recorder = Recorder([page(["a", "b"], "c1")])
    result = make_client(recorder).events.list(channel="payments", limit=2)
    assert [e.id for e in result.data.items] == ["a", "b"]
    assert result.data.next_cursor == "c1"
    assert result.request_id


def test_list_all_follows_the_cursors_with_the_same_filters() -> None:
    recorder = Recorder([page(["a", "b"], "c1"), page(["c"], "c2"), page([], None)])
    ids = [e.id for e in make_client(recorder).events.list_all(channel="payments", limit=2)]
    assert ids == ["a", "b", "c"]
    params = [dict(r.url.params) for r in recorder.requests]
    assert params == [
        {"channel": "payments", "limit": "2"},
        {"channel": "payments", "limit": "2", "cursor": "c1"},
        {"channel": "payments", "limit": "2", "cursor": "c2"},
    ]


def test_list_all_requests_a_page_only_when_the_loop_gets_to_it() -> None:
    recorder = Recorder([page(["a", "b"], "c1"), page(["c"], None)])
    events = make_client(recorder).events.list_all()
    assert recorder.requests == []
    for event in events:
        if event.id == "a":
            break
    assert len(recorder.requests) == 1


def test_a_server_repeating_a_cursor_cannot_make_the_loop_endless() -> None:
    recorder = Recorder([page(["a"], "c1"), page(["b"], "c1")])
    with pytest.raises(tocsin.TocsinError, match="same cursor"):
        list(make_client(recorder).events.list_all())


@pytest.mark.anyio
async def test_async_list_all_walks_every_page() -> None:
    recorder = Recorder([page(["a"], "c1"), page(["b"], None)])
    client = make_async_client(recorder)
    ids = [e.id async for e in client.events.list_all(tag="eu")]
    assert ids == ["a", "b"]
    assert [r.url.params.get("tag") for r in recorder.requests] == ["eu", "eu"]
