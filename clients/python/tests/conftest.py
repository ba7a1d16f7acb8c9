"""Fixtures of both suites."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    """The async tests run on asyncio (anyio's pytest plugin, which comes
    with httpx's anyio, runs them: no pytest-asyncio needed)."""
    return "asyncio"


@pytest.fixture(autouse=True)
def no_tocsin_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The caller's shell must not change what a test sees."""
    monkeypatch.delenv("TOCSIN_API_KEY", raising=False)
    monkeypatch.delenv("TOCSIN_BASE_URL", raising=False)
