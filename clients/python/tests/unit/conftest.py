"""Unit-test helpers: a client whose httpx transport is a MockTransport that
answers from a list (or a function), records every request, and whose
retries do not wait (the waits are recorded instead)."""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, List, Optional, Union

import httpx
import pytest

import tocsin

API_KEY = "tk_unit_test"
BASE_URL = "http://tocsin.test"
REQUEST_ID = "5d3c7a52-0000-4000-8000-000000000001"

Answer = Union[httpx.Response, Exception]


def envelope(
    data: Any,
    status: int = 200,
    *,
    headers: Optional[Dict[str, str]] = None,
    request_id: str = REQUEST_ID,
) -> httpx.Response:
    """A success answer as the service sends it, rate-limit headers included."""
    return httpx.Response(
        status,
        json={"success": True, "data": data, "requestId": request_id},
        headers={**rate_limit_headers(), **(headers or {})},
    )


def error(
    status: int,
    message: str = "nope",
    *,
    headers: Optional[Dict[str, str]] = None,
    details: Optional[List[Dict[str, Any]]] = None,
    request_id: str = REQUEST_ID,
) -> httpx.Response:
    body: Dict[str, Any] = {"success": False, "error": message, "requestId": request_id}
    if details is not None:
        body["details"] = details
    return httpx.Response(status, json=body, headers={**rate_limit_headers(), **(headers or {})})


def rate_limit_headers(limit: int = 100, remaining: int = 99, reset: int = 4_102_444_800) -> Dict[str, str]:
    return {
        "X-RateLimit-Limit": str(limit),
        "X-RateLimit-Remaining": str(remaining),
        "X-RateLimit-Reset": str(reset),
    }


def event_json(**overrides: Any) -> Dict[str, Any]:
    """An event as the service answers with it."""
    event = {
        "id": "0197a3c2-5f1e-7b8a-9c0d-1e2f3a4b5c6d",
        "channelName": "payments",
        "title": "Payment failed",
        "description": None,
        "icon": None,
        "tags": [],
        "metadata": {},
        "userId": None,
        "notify": True,
        "source": None,
        "priority": "normal",
        "alertKey": None,
        "parser": "text",
        "descriptionHtml": None,
        "url": None,
        "createdAt": "2026-11-22T10:00:00.000+00:00",
        "notification": {"state": "queued"},
    }
    event.update(overrides)
    return event


def identity_json(**overrides: Any) -> Dict[str, Any]:
    """A user as identify and `GET /v1/users/{userId}` answer with it."""
    identity = {
        "user_id": "user_7",
        "properties": {},
        "aliases": [],
        "createdAt": "2026-11-22T10:00:00Z",
        "updatedAt": "2026-11-22T10:00:00Z",
        "firstSeenAt": "2026-11-22T10:00:00Z",
        "lastSeenAt": "2026-11-22T10:00:00Z",
        "eventCount": 0,
    }
    identity.update(overrides)
    return identity


def user_json(**overrides: Any) -> Dict[str, Any]:
    """A user as `GET /v1/users` lists it."""
    user = {
        "userId": "user_7",
        "properties": {"plan": "pro"},
        "aliases": ["ada@example.com"],
        "firstSeenAt": "2026-11-20T09:30:00Z",
        "lastSeenAt": "2026-11-22T10:00:00Z",
        "eventCount": 4,
        "createdAt": "2026-11-20T09:30:00Z",
        "updatedAt": "2026-11-22T10:00:00Z",
    }
    user.update(overrides)
    return user


def insight_json(**overrides: Any) -> Dict[str, Any]:
    """An insight as the service answers with it."""
    insight = {
        "title": "Revenue today",
        "value": 1250,
        "icon": "💰",
        "createdAt": "2026-11-22T10:00:00.000+00:00",
        "updatedAt": "2026-11-22T10:00:00.000+00:00",
    }
    insight.update(overrides)
    return insight


def device_json(**overrides: Any) -> Dict[str, Any]:
    """A device as the service answers with it: an APNs token, its rules at
    their defaults."""
    device = {
        "id": "0197a3c2-5f1e-7b8a-9c0d-1e2f3a4b5c6d",
        "kind": "apns",
        "token": "a1" * 32,
        "environment": "sandbox",
        "endpoint": None,
        "name": None,
        "channels": None,
        "tags": None,
        "minPriority": "low",
        "quietHours": None,
        "burst": None,
        "active": True,
        "deactivatedReason": None,
        "createdAt": "2026-11-22T10:00:00.000+00:00",
        "updatedAt": "2026-11-22T10:00:00.000+00:00",
    }
    device.update(overrides)
    return device


class Recorder:
    """Answers requests from `answers` in order (an exception is raised as
    the transport's failure) or from a function, and keeps every request."""

    def __init__(self, answers: Union[List[Answer], Callable[[httpx.Request], Answer]]) -> None:
        self.answers = answers
        self.requests: List[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if callable(self.answers):
            answer = self.answers(request)
        else:
            if not self.answers:
                raise AssertionError(f"unexpected request {request.method} {request.url}")
            answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def body(self, index: int = -1) -> Any:
        return json.loads(self.requests[index].content)

    @property
    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)


def make_client(recorder: Recorder, **options: Any) -> "tocsin.Tocsin":
    client = tocsin.Tocsin(
        options.pop("api_key", API_KEY),
        base_url=options.pop("base_url", BASE_URL),
        http_client=httpx.Client(transport=recorder.transport),
        **options,
    )
    client.sleeps = []  # type: ignore[attr-defined]
    client._sleep = client.sleeps.append  # type: ignore[attr-defined]
    return client


def make_async_client(recorder: Recorder, **options: Any) -> "tocsin.AsyncTocsin":
    client = tocsin.AsyncTocsin(
        options.pop("api_key", API_KEY),
        base_url=options.pop("base_url", BASE_URL),
        http_client=httpx.AsyncClient(transport=recorder.transport),
        **options,
    )
    sleeps: List[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    client.sleeps = sleeps  # type: ignore[attr-defined]
    client._sleep = sleep
    return client
