"""Every public /v1 operation of the service's document has a method on both
clients, and each method's arguments are exactly the operation's fields.

The operation tables are generated from the document (scripts/generate.py),
and the drift test keeps them equal to the running service's, so a field or
route added to the API fails here until the clients take it."""

from __future__ import annotations

import inspect
import typing
from typing import Any, Callable, Dict, List, Tuple

import pytest

import tocsin
from tocsin._models import OPERATIONS

#: Each operation's method, as `client.<path>`. The Python samples of the
#: /docs page (ingest/src/openapi/code_samples.rs) call the same names.
METHODS: Dict[str, str] = {
    "createEvent": "events.create",
    "getEvent": "events.get",
    "listEvents": "events.list",
    "streamEvents": "events.stream",
    "identify": "identify",
    "getUser": "users.get",
    "listUsers": "users.list",
    "setInsight": "insights.set",
    "incrementInsight": "insights.increment",
    "listInsights": "insights.list",
    "deleteInsight": "insights.delete",
    "listChannels": "channels.list",
    "eventStats": "stats.events",
    "registerDevice": "devices.create",
    "listDevices": "devices.list",
    "updateDevice": "devices.update",
    "deleteDevice": "devices.delete",
    "getWebPushKey": "devices.webpush_key",
}

#: Options every call takes, which are not fields of the request.
CALL_OPTIONS = {"timeout", "extra_headers"}
STREAM_OPTIONS = {"idle_timeout"}

#: Arguments named otherwise than the field they fill: an increment takes
#: `by`, sent as its `value` (`{"$inc": by}`).
RENAMED: Dict[str, Dict[str, str]] = {"incrementInsight": {"by": "value"}}


def snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in name)


def method(client: object, path: str) -> Callable[..., Any]:
    target: Any = client
    for part in path.split("."):
        target = getattr(target, part)
    return typing.cast(Callable[..., Any], target)


CLIENTS = [tocsin.Tocsin("k"), tocsin.AsyncTocsin("k")]


def test_every_operation_has_a_method_and_every_method_an_operation() -> None:
    assert sorted(OPERATIONS) == sorted(METHODS)


@pytest.mark.parametrize("client", CLIENTS, ids=["sync", "async"])
@pytest.mark.parametrize("operation_id", sorted(METHODS))
def test_a_methods_arguments_are_its_operations_fields(client: object, operation_id: str) -> None:
    operation = OPERATIONS[operation_id]
    fn = method(client, METHODS[operation_id])
    params = inspect.signature(fn).parameters.values()
    positional = [p.name for p in params if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
    keywords = {p.name: p for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY}

    assert positional == [snake(name) for name in operation.path_params]
    options = set(CALL_OPTIONS)
    if operation.idempotency_key:  # every POST, and an insight's increment
        options.add("idempotency_key")
    if operation_id == "streamEvents":
        options |= STREAM_OPTIONS
    renamed = RENAMED.get(operation_id, {})
    fields = {renamed.get(name, name): param for name, param in keywords.items()}
    assert set(fields) - options == set(operation.query) | set(operation.body)
    assert options <= set(keywords), "every call takes the per-call options"
    for name in operation.required_body:
        assert fields[name].default is inspect.Parameter.empty, f"{name} is required"
    for name, param in fields.items():
        if name not in operation.required_body:
            assert param.default is not inspect.Parameter.empty, f"{name} is optional"


@pytest.mark.parametrize("client", CLIENTS, ids=["sync", "async"])
@pytest.mark.parametrize("operation_id", sorted(METHODS))
def test_a_methods_result_is_its_operations_schema(client: object, operation_id: str) -> None:
    fn = method(client, METHODS[operation_id])
    returned = typing.get_type_hints(fn)["return"]
    if operation_id == "streamEvents":
        # events.stream yields the events of the stream, one of its kinds of message.
        assert returned in (tocsin.EventStream, tocsin.AsyncEventStream)
        assert tocsin.types.Event in typing.get_args(tocsin.types.StreamMessage)
        assert OPERATIONS[operation_id].result == "StreamMessage"
        return
    assert typing.get_origin(returned) is tocsin.TocsinResponse
    (data,) = typing.get_args(returned)
    assert data.__name__ == OPERATIONS[operation_id].result


@pytest.mark.parametrize("client", CLIENTS, ids=["sync", "async"])
@pytest.mark.parametrize("resource", ["events", "users"])
def test_list_all_takes_the_filters_of_list(client: object, resource: str) -> None:
    def names(fn: Callable[..., Any]) -> List[Tuple[str, Any]]:
        return [(p.name, p.default) for p in inspect.signature(fn).parameters.values()]

    listing: Any = getattr(client, resource)
    assert names(listing.list_all) == names(listing.list)


@pytest.mark.parametrize("client", CLIENTS, ids=["sync", "async"])
def test_stream_takes_the_arguments_of_events_stream_and_yields_every_message(client: object) -> None:
    """`client.stream` is `GET /v1/stream` whole: the operation's arguments,
    every kind of message (an event, an insight, a deleted insight)."""
    fn = method(client, "stream")
    assert inspect.signature(fn).parameters == inspect.signature(method(client, "events.stream")).parameters
    assert typing.get_type_hints(fn)["return"] in (tocsin.LiveStream, tocsin.AsyncLiveStream)
    members = {member.__name__ for member in typing.get_args(tocsin.types.StreamMessage)}
    assert members == {"Event", "Insight", "InsightDeleted"}
    assert OPERATIONS["streamEvents"].result == "StreamMessage"


def test_both_clients_have_the_same_surface() -> None:
    sync, asyncc = CLIENTS
    for path in METHODS.values():
        sync_params = inspect.signature(method(sync, path)).parameters
        assert sync_params == inspect.signature(method(asyncc, path)).parameters, path
        is_async = inspect.iscoroutinefunction(method(asyncc, path))
        assert is_async == (path not in ("events.stream",)), path
    assert inspect.signature(sync.stream).parameters == inspect.signature(asyncc.stream).parameters
    assert not inspect.iscoroutinefunction(asyncc.stream)
    assert inspect.isasyncgenfunction(method(asyncc, "events.list_all"))
    assert inspect.isasyncgenfunction(method(asyncc, "users.list_all"))
