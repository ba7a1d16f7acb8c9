"""A client's settings: where they come from (arguments, then the
TOCSIN_* environment variables, then defaults) and the checks that refuse a
bad one when the client is built, not at its first call.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping, Optional, Union
from urllib.parse import urlsplit

import httpx

from ._exceptions import TocsinError

#: Tocsin is self-hosted: there is no hosted default, so the default is where
#: `cargo run -p ingest` listens.
DEFAULT_BASE_URL = "http://127.0.0.1:8080"
#: Seconds; the TypeScript client's 30 000 ms.
DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_RETRIES = 2

API_KEY_ENV = "TOCSIN_API_KEY"
BASE_URL_ENV = "TOCSIN_BASE_URL"

Timeout = Union[float, httpx.Timeout]


@dataclass(frozen=True)
class ClientConfig:
    """What every request of one client shares. Immutable: `with_options`
    makes a new one."""

    api_key: str
    base_url: str
    timeout: httpx.Timeout
    max_retries: int
    default_headers: Mapping[str, str]


def read_env(name: str) -> Optional[str]:
    """The variable's value, stripped; None when it is unset or blank (an
    empty variable passed on by a shell or a container means "not set")."""
    value = os.environ.get(name, "").strip()
    return value or None


def resolve_api_key(api_key: Optional[str]) -> str:
    """The key given, else TOCSIN_API_KEY. An explicit empty key is refused
    rather than replaced by the variable: it is a mistake, not a request for
    the default."""
    if api_key is None:
        api_key = read_env(API_KEY_ENV)
        if api_key is None:
            raise TocsinError(
                "An API key is required: pass Tocsin(api_key=...) or set the "
                f"{API_KEY_ENV} environment variable. Keys are made on the server "
                "with `ingest keys create --org <org> --project <project>`."
            )
    if not isinstance(api_key, str) or api_key.strip() == "":
        raise TocsinError("api_key must be a non-empty string")
    return api_key


def resolve_base_url(base_url: Union[str, httpx.URL, None]) -> str:
    """The base URL given, else TOCSIN_BASE_URL, else the default, checked
    and without trailing slashes so `/v1/...` joins cleanly."""
    if base_url is not None:
        return check_base_url(str(base_url), "base_url")
    from_env = read_env(BASE_URL_ENV)
    if from_env is not None:
        return check_base_url(from_env, BASE_URL_ENV)
    return DEFAULT_BASE_URL


def check_base_url(value: str, source: str) -> str:
    """Refuses anything but an absolute http(s) URL without credentials,
    query or fragment, naming where the value came from. A path prefix (a
    reverse proxy's `/tocsin`) is kept. A URL ending in `/v1` is refused: the
    base URL is the server's root, and `/v1/v1/events` would 404 on every
    call."""
    text = value.strip().rstrip("/")
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise TocsinError(
            f"{source} must be an absolute http(s) URL such as {DEFAULT_BASE_URL}, got {value!r}"
        )
    if parts.username is not None or parts.password is not None:
        raise TocsinError(f"{source} must not contain a user name or password: the key goes in api_key")
    if parts.query or parts.fragment:
        raise TocsinError(f"{source} must not have a query or fragment: paths are appended to it")
    if parts.path.endswith("/v1"):
        raise TocsinError(
            f"{source} is the server's root, without /v1 (the client adds it): got {value!r}"
        )
    return text


def resolve_timeout(timeout: Timeout, what: str = "timeout") -> httpx.Timeout:
    """Seconds (applied to each of connect, write, pool and every read, as
    httpx does), or an httpx.Timeout for finer control."""
    if isinstance(timeout, httpx.Timeout):
        return timeout
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise TocsinError(f"{what} must be a positive number of seconds, got {timeout!r}")
    return httpx.Timeout(float(timeout))


def check_max_retries(max_retries: int) -> int:
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise TocsinError(f"max_retries must be a non-negative integer, got {max_retries!r}")
    return max_retries
