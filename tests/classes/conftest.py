"""Fixtures for classes: a fixed clock on the loaded app, an instructor signed in, and a
learner account signed in on its own browser."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.clock import FixedClock
from app.questions.bank import load_bank
from app.questions.service import import_bank
from tests.factories import T0, TESTS, Account, login

EXERCISE_BANK = TESTS / "fixtures" / "exercise_bank"
VARIANT_BANK = TESTS / "fixtures" / "variant_bank"


@pytest.fixture
def clock(client: TestClient) -> FixedClock:
    """The app's clock, standing at T0 until a test advances it."""
    fixed = FixedClock(T0)
    client.app.state.clock = fixed  # type: ignore[attr-defined]
    return fixed


@pytest.fixture
def instructor(make_user: Callable[..., Account]) -> Account:
    return make_user("ida", "instructor")


@pytest.fixture
def instructor_client(new_client: Callable[..., TestClient], instructor: Account,
                      client: TestClient) -> TestClient:
    browser = new_client()
    assert login(browser, instructor.username).status_code == 303
    return browser


@pytest.fixture
def learner_account(make_user: Callable[..., Account]) -> Account:
    return make_user("lena", "learner")


@pytest.fixture
def learner_client(new_client: Callable[..., TestClient], learner_account: Account,
                   client: TestClient) -> TestClient:
    browser = new_client()
    assert login(browser, learner_account.username).status_code == 303
    return browser


@pytest.fixture
def more_banks(loaded: None, session_factory: Any) -> None:
    """The fixture exercise and the variant bank's questions too (beside the fixture bank)."""
    for folder in (EXERCISE_BANK, VARIANT_BANK):
        bank = load_bank(folder)
        assert bank.ok, bank.errors
        with session_factory.begin() as session:
            import_bank(db_session=session, bank=bank, retire_missing=False)
