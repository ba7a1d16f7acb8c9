"""What one call sends: its method, path, query and body in the API's own
(camelCase) names, and the headers every request carries — the key, the
client's identification, the Idempotency-Key of a POST, the caller's extras.
Building it is the same for the sync and the async client."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Dict, Generic, List, Mapping, Optional, Tuple, TypeVar, Union
from urllib.parse import quote

import httpx

from ._config import ClientConfig, Timeout, resolve_timeout
from ._exceptions import TocsinError
from ._types import NotGiven
from ._version import __version__

T = TypeVar("T")

#: Says which client sent a request, as openai-python and stripe-python do.
CLIENT_ID = f"tocsin-python/{__version__}"

#: A query parameter's value; None leaves the parameter out.
QueryValue = Union[str, int, bool, datetime, None]

#: Extra headers of a call: a value replaces the client's header of that name
#: (compared case-insensitively); None removes it.
Headers = Mapping[str, Optional[str]]


@dataclass(frozen=True)
class CallSpec(Generic[T]):
    """One call as a resource describes it to the request loop."""

    method: str
    #: Below the base URL, starting with "/v1/"; path segments already encoded.
    path: str
    #: Turns the envelope's `data` into the result type.
    cast: Callable[[Any], T]
    #: Query parameters, in the API's names.
    query: Optional[Mapping[str, QueryValue]] = None
    #: The JSON body, in the API's names.
    body: Optional[Mapping[str, Any]] = None
    #: The call is not idempotent by itself (every POST, an insight's
    #: increment): it carries an Idempotency-Key, the caller's or one made
    #: for it, so a retry never does the work twice.
    keyed: bool = False


@dataclass(frozen=True)
class RequestOptions:
    """The per-call options every method takes as keyword arguments."""

    #: Calls that are not idempotent by themselves only (POST, an insight's
    #: increment): makes the call safe to repeat; the server replays the
    #: first answer for 24 hours. One is made for every such call that has none.
    idempotency_key: Optional[str] = None
    #: Overrides the client's timeout for this call (each attempt).
    timeout: Optional[Timeout] = None
    #: Added over the client's headers; None removes one.
    extra_headers: Optional[Headers] = None


def path_segment(value: str, name: str) -> str:
    """One encoded path segment. An empty id would turn GET /v1/events/{id}
    into GET /v1/events/, another route, so it is refused."""
    if not isinstance(value, str) or value == "":
        raise TocsinError(f"{name} must be a non-empty string, got {value!r}")
    return quote(value, safe="")


def wire_fields(
    names: Mapping[str, str], values: Mapping[str, Any], *, none_clears: bool = False
) -> Dict[str, Any]:
    """`values` (Python names) in the API's names, leaving out the ones that
    were not given: NOT_GIVEN always, and None too unless `none_clears`.
    For most calls the service's defaults apply to a field that is absent,
    so None means "not given"; in an update None clears the field and is
    sent as null. `names` maps each Python name to its wire name; the
    generated module holds them per operation, read from the OpenAPI
    document."""
    unknown = set(values) - set(names)
    if unknown:  # a bug in this package, not the caller's: say so loudly
        raise AssertionError(f"no wire name for {sorted(unknown)}")
    return {
        names[key]: value
        for key, value in values.items()
        if not isinstance(value, NotGiven) and (none_clears or value is not None)
    }


def rfc3339(name: str, value: datetime) -> str:
    """An aware datetime as RFC 3339 in UTC (`2026-03-01T09:30:00.123456Z`).
    A naive one is refused, naming the argument: it is local time or UTC
    depending on who made it, and guessing would shift it by hours without
    a word."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise TocsinError(
            f"{name} must be a timezone-aware datetime (e.g. datetime.now(timezone.utc)), "
            f"got the naive {value.isoformat()}"
        )
    return value.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def _query_text(name: str, value: Union[str, int, bool, datetime]) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return rfc3339(name, value)
    return str(value)


def _set_header(headers: Dict[str, str], name: str, value: Optional[str]) -> None:
    for key in [key for key in headers if key.lower() == name.lower()]:
        del headers[key]
    if value is not None:
        headers[name] = value


def request_headers(config: ClientConfig, extra: Optional[Headers]) -> Dict[str, str]:
    """The headers every request of this client sends, then the call's extras."""
    headers = {
        "Authorization": f"Bearer {config.api_key}",
        "Accept": "application/json",
        "User-Agent": CLIENT_ID,
        "X-Tocsin-Client": CLIENT_ID,
    }
    for name, value in config.default_headers.items():
        _set_header(headers, name, value)
    for name, maybe in (extra or {}).items():
        if maybe is not None and not isinstance(maybe, str):
            raise TocsinError(f"extra_headers[{name!r}] must be a string, or None to remove it")
        _set_header(headers, name, maybe)
    return headers


def build_request(
    http: Union[httpx.Client, httpx.AsyncClient],
    config: ClientConfig,
    spec: CallSpec[Any],
    options: RequestOptions,
    *,
    timeout: Optional[httpx.Timeout] = None,
    extra: Optional[Headers] = None,
) -> Tuple[httpx.Request, bool]:
    """The request of every attempt of one call, and whether it carries an
    Idempotency-Key. Built once, so every retry of a keyed call (a POST, an
    insight's increment) sends the same key: the caller's, or a random UUID
    made here when the caller gave none."""
    headers = request_headers(config, {**(extra or {}), **(options.extra_headers or {})})
    content: Optional[bytes] = None
    if spec.body is not None:
        content = json.dumps(spec.body, ensure_ascii=False, separators=(",", ":")).encode()
        headers["Content-Type"] = "application/json"
    if spec.keyed:
        if options.idempotency_key is not None and options.idempotency_key.strip() == "":
            raise TocsinError("idempotency_key must be a non-empty string")
        if not any(key.lower() == "idempotency-key" for key in headers):
            headers["Idempotency-Key"] = options.idempotency_key or str(uuid.uuid4())
    elif options.idempotency_key is not None:
        raise TocsinError(
            "idempotency_key applies to POST calls and insights.increment only, "
            f"not {spec.method} {spec.path}"
        )
    has_key = any(key.lower() == "idempotency-key" for key in headers)

    query: List[Tuple[str, Union[str, int, float, bool, None]]] = [
        (name, _query_text(name, value))
        for name, value in (spec.query or {}).items()
        if value is not None
    ]
    if timeout is None:
        timeout = (
            resolve_timeout(options.timeout) if options.timeout is not None else config.timeout
        )
    request = http.build_request(
        spec.method,
        config.base_url + spec.path,
        params=query,
        content=content,
        headers=headers,
        timeout=timeout,
    )
    return request, has_key
