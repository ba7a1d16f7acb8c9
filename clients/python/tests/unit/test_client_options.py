"""Building a client: the environment fallbacks, the checks that refuse a bad
setting at construction, context managers, and what every request carries."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import httpx
import pytest

import tocsin

from .conftest import API_KEY, Recorder, device_json, envelope, error, event_json, identity_json, make_async_client, make_client


def test_the_key_and_base_url_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOCSIN_API_KEY", "tk_from_env")
    monkeypatch.setenv("TOCSIN_BASE_URL", "https://tocsin.example.com/prefix/")
    recorder = Recorder([envelope({"items": []})])
    client = tocsin.Tocsin(http_client=httpx.Client(transport=recorder.transport))
    assert client.base_url == "https://tocsin.example.com/prefix"
    client.channels.list()
    assert str(recorder.requests[0].url) == "https://tocsin.example.com/prefix/v1/channels"
    assert recorder.requests[0].headers["authorization"] == "Bearer tk_from_env"


def test_arguments_win_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOCSIN_API_KEY", "tk_from_env")
    monkeypatch.setenv("TOCSIN_BASE_URL", "https://env.example.com")
    client = tocsin.Tocsin("tk_given", base_url="http://given.example.com")
    assert client._config.api_key == "tk_given"
    assert client.base_url == "http://given.example.com"


def test_the_async_client_reads_the_environment_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOCSIN_API_KEY", "tk_from_env")
    monkeypatch.setenv("TOCSIN_BASE_URL", "http://10.0.0.1:9000")
    client = tocsin.AsyncTocsin()
    assert client._config.api_key == "tk_from_env"
    assert client.base_url == "http://10.0.0.1:9000"


def test_without_any_setting_the_base_url_is_the_local_default() -> None:
    assert tocsin.Tocsin(API_KEY).base_url == "http://127.0.0.1:8080"


@pytest.mark.parametrize("cls", [tocsin.Tocsin, tocsin.AsyncTocsin])
def test_a_missing_key_is_a_clear_error_at_construction(cls: type) -> None:
    with pytest.raises(tocsin.TocsinError, match="TOCSIN_API_KEY"):
        cls()


def test_a_blank_variable_counts_as_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOCSIN_API_KEY", "  ")
    with pytest.raises(tocsin.TocsinError, match="API key is required"):
        tocsin.Tocsin()


def test_an_explicit_empty_key_is_refused_not_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOCSIN_API_KEY", "tk_from_env")
    with pytest.raises(tocsin.TocsinError, match="non-empty"):
        tocsin.Tocsin("")


@pytest.mark.parametrize(
    ("url", "complaint"),
    [
        ("tocsin.example.com", "absolute http"),
        ("ftp://tocsin.example.com", "absolute http"),
        ("http://user:pw@tocsin.example.com", "user name or password"),
        ("http://tocsin.example.com?x=1", "query or fragment"),
        ("http://tocsin.example.com/v1", "without /v1"),
    ],
)
def test_a_bad_base_url_is_refused_naming_where_it_came_from(
    monkeypatch: pytest.MonkeyPatch, url: str, complaint: str
) -> None:
    with pytest.raises(tocsin.TocsinError, match=complaint) as raised:
        tocsin.Tocsin(API_KEY, base_url=url)
    assert "base_url" in str(raised.value)
    monkeypatch.setenv("TOCSIN_BASE_URL", url)
    with pytest.raises(tocsin.TocsinError, match="TOCSIN_BASE_URL"):
        tocsin.Tocsin(API_KEY)


@pytest.mark.parametrize("timeout", [0, -1, "30", True])
def test_a_bad_timeout_is_refused(timeout: object) -> None:
    with pytest.raises(tocsin.TocsinError, match="timeout"):
        tocsin.Tocsin(API_KEY, timeout=timeout)  # type: ignore[arg-type]


@pytest.mark.parametrize("max_retries", [-1, 1.5, None])
def test_a_bad_max_retries_is_refused(max_retries: object) -> None:
    with pytest.raises(tocsin.TocsinError, match="max_retries"):
        tocsin.Tocsin(API_KEY, max_retries=max_retries)  # type: ignore[arg-type]


def test_the_wrong_kind_of_http_client_is_refused() -> None:
    with pytest.raises(tocsin.TocsinError, match="httpx.Client"):
        tocsin.Tocsin(API_KEY, http_client=httpx.AsyncClient())  # type: ignore[arg-type]


def test_the_context_manager_closes_the_client_it_made() -> None:
    with tocsin.Tocsin(API_KEY) as client:
        http = client._http
        assert not http.is_closed
    assert http.is_closed


def test_a_passed_in_http_client_belongs_to_the_caller() -> None:
    http = httpx.Client()
    with tocsin.Tocsin(API_KEY, http_client=http):
        pass
    assert not http.is_closed
    http.close()


@pytest.mark.anyio
async def test_the_async_context_manager_closes_the_client_it_made() -> None:
    async with tocsin.AsyncTocsin(API_KEY) as client:
        http = client._http
    assert http.is_closed


def test_every_request_says_who_sent_it_and_carries_the_key() -> None:
    recorder = Recorder([envelope({"items": []})])
    make_client(recorder).channels.list()
    headers = recorder.requests[0].headers
    assert headers["authorization"] == f"Bearer {API_KEY}"
    assert headers["user-agent"] == f"tocsin-python/{tocsin.__version__}"
    assert headers["x-tocsin-client"] == f"tocsin-python/{tocsin.__version__}"
    assert headers["accept"] == "application/json"


def test_request_fields_are_snake_case_and_sent_in_the_apis_camel_case() -> None:
    recorder = Recorder([envelope(event_json(), 201)])
    make_client(recorder).events.create(
        channel_name="payments",
        title="Payment failed",
        tags=("eu", "card"),
        metadata={"orderId": 1042},
        user_id="user_7",
        notify=False,
        priority="high",
    )
    assert recorder.body() == {
        "channelName": "payments",
        "title": "Payment failed",
        "tags": ["eu", "card"],
        "metadata": {"orderId": 1042},
        "userId": "user_7",
        "notify": False,
        "priority": "high",
    }
    assert recorder.requests[0].headers["content-type"] == "application/json"


def test_identify_sends_user_id_as_the_api_spells_it() -> None:
    identity = identity_json(user_id="u1")
    recorder = Recorder([envelope(identity)])
    result = make_client(recorder).identify(user_id="u1", aliases=["a@example.com"])
    assert recorder.body() == {"user_id": "u1", "aliases": ["a@example.com"]}
    assert result.data.user_id == "u1"
    assert result.data.created_at == datetime(2026, 11, 22, 10, tzinfo=timezone.utc)


def test_query_parameters_are_mapped_and_datetimes_sent_in_utc() -> None:
    recorder = Recorder([envelope({"items": [], "nextCursor": None})])
    since = datetime(2026, 11, 22, 12, 30, tzinfo=timezone(timedelta(hours=2)))
    make_client(recorder).events.list(channel="payments", user_id="user_7", since=since, limit=20)
    params = recorder.requests[0].url.params
    assert dict(params) == {
        "channel": "payments",
        "userId": "user_7",
        "since": "2026-11-22T10:30:00Z",
        "limit": "20",
    }


def test_a_naive_datetime_is_refused_before_anything_is_sent() -> None:
    recorder = Recorder([])
    with pytest.raises(tocsin.TocsinError, match="timezone-aware"):
        make_client(recorder).stats.events(since=datetime(2026, 11, 22))
    assert recorder.requests == []


def test_ids_are_url_encoded_and_an_empty_id_is_refused() -> None:
    identity = identity_json(user_id="a/b c")
    recorder = Recorder([envelope(identity)])
    client = make_client(recorder)
    client.users.get("a/b c")
    assert recorder.requests[0].url.raw_path == b"/v1/users/a%2Fb%20c"
    with pytest.raises(tocsin.TocsinError, match="non-empty"):
        client.events.get("")


def test_per_call_options_set_timeout_and_headers() -> None:
    recorder = Recorder([envelope(event_json(), 201)])
    client = make_client(recorder, default_headers={"X-Team": "payments"})
    client.events.create(
        channel_name="c",
        title="t",
        timeout=2.5,
        extra_headers={"X-Trace": "abc", "X-Team": None, "User-Agent": "my-wrapper/1.0"},
    )
    request = recorder.requests[0]
    assert request.headers["x-trace"] == "abc"
    assert "x-team" not in request.headers
    assert request.headers["user-agent"] == "my-wrapper/1.0"
    assert request.extensions["timeout"] == httpx.Timeout(2.5).as_dict()


def test_the_clients_timeout_applies_when_a_call_sets_none() -> None:
    recorder = Recorder([envelope({"items": []})])
    make_client(recorder, timeout=4.0).channels.list()
    assert recorder.requests[0].extensions["timeout"] == httpx.Timeout(4.0).as_dict()


def test_an_idempotency_key_on_a_get_is_refused() -> None:
    from tocsin._request import RequestOptions, build_request
    from tocsin._operation import call

    client = make_client(Recorder([]))
    with pytest.raises(tocsin.TocsinError, match="POST"):
        build_request(client._http, client._config, call("listChannels", dict), RequestOptions(idempotency_key="k"))


@pytest.mark.anyio
async def test_the_async_client_maps_fields_the_same_way() -> None:
    recorder = Recorder([envelope(event_json(), 201)])
    client = make_async_client(recorder)
    await client.events.create(channel_name="payments", title="t", user_id="u")
    assert recorder.body() == {"channelName": "payments", "title": "t", "userId": "u"}


def test_request_calls_a_route_the_client_does_not_wrap_through_the_same_loop() -> None:
    recorder = Recorder([error(503), envelope({"id": "org-1", "name": "Acme"}, 201)])
    client = make_client(recorder)
    result = client.request("post", "/admin/v1/organizations", body={"name": "Acme"}, query={"dryRun": True})
    assert result.data == {"id": "org-1", "name": "Acme"} and result.status_code == 201
    first, second = recorder.requests
    assert (first.method, first.url.path, dict(first.url.params)) == ("POST", "/admin/v1/organizations", {"dryRun": "true"})
    assert recorder.body() == {"name": "Acme"}
    assert first.headers["idempotency-key"] == second.headers["idempotency-key"]
    with pytest.raises(tocsin.TocsinError, match="must start with /"):
        client.request("GET", "admin/v1/organizations")


@pytest.mark.anyio
async def test_the_async_request_returns_the_raw_data() -> None:
    recorder = Recorder([envelope([{"id": "k1"}])])
    result = await make_async_client(recorder).request("GET", "/admin/v1/keys")
    assert result.data == [{"id": "k1"}]


def test_a_web_push_subscription_is_sent_as_the_browser_gave_it() -> None:
    device = device_json(kind="webpush", token=None, environment=None, endpoint="https://push.example.com/abc")
    recorder = Recorder([envelope(device, 201)])
    subscription: tocsin.types.WebPushSubscription = {
        "endpoint": "https://push.example.com/abc",
        "expirationTime": None,
        "keys": {"p256dh": "BPk", "auth": "Au"},
    }
    result = make_client(recorder).devices.create(kind="webpush", subscription=subscription, channels=("ops",))
    assert recorder.body() == {"kind": "webpush", "subscription": subscription, "channels": ["ops"]}
    assert result.data.kind == "webpush" and result.data.endpoint == "https://push.example.com/abc"
