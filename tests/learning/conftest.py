"""Fixtures for the learning loop: a fixed clock on the app, learner accounts, more browsers."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient

from app.clock import FixedClock
from tests.authoring.conftest import (  # noqa: F401  (fixtures, used by name)
    PASSWORD,
    fast_hasher,
    make_user,
    new_client,
)
from tests.factories import form_fields, parse, post_account_form

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@pytest.fixture
def clock(client: TestClient) -> FixedClock:
    """The app's clock, standing at T0 until a test advances it."""
    fixed = FixedClock(T0)
    client.app.state.clock = fixed  # type: ignore[attr-defined]
    return fixed


def sign_up(client: TestClient, username: str, password: str = PASSWORD) -> object:
    """Create a learner account through the sign-up form, like a browser."""
    return post_account_form(client, "/signup", "form.signup-form", username, password)


def answer(client: TestClient, slug: str, value: object, confidence: str | None = None,
           url: str | None = None) -> object:
    """Open a question page (or the Review page) and submit its answer form with a confidence."""
    page = parse(client.get(url or f"/questions/{slug}"))
    action, hidden = form_fields(page, "form.answer-form")
    data: dict[str, object] = {**hidden, "answer": value}
    if confidence:
        data["confidence"] = confidence
    return client.post(action, data=data, follow_redirects=False)


@pytest.fixture
def browser_client(new_client: Callable[..., TestClient], client: TestClient) -> TestClient:  # noqa: F811
    """Another browser on the same (loaded) app."""
    return new_client()
