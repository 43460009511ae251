"""Fixtures for the learning loop: a fixed clock on the app and another browser."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

from app.clock import FixedClock
from tests.factories import T0


@pytest.fixture
def clock(client: TestClient) -> FixedClock:
    """The app's clock, standing at T0 until a test advances it."""
    fixed = FixedClock(T0)
    client.app.state.clock = fixed  # type: ignore[attr-defined]
    return fixed


@pytest.fixture
def browser_client(new_client: Callable[..., TestClient], client: TestClient) -> TestClient:
    """Another browser on the same (loaded) app."""
    return new_client()
