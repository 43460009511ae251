"""Fixtures for classes: an instructor signed in, and a
learner account signed in on its own browser."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.questions.bank import load_bank
from app.questions.service import import_bank
from tests.factories import EXERCISE_BANK, VARIANT_BANK, Account, login


@pytest.fixture
def instructor(make_user: Callable[..., Account]) -> Account:
    return make_user("ida", "instructor")


@pytest.fixture
def instructor_client(new_client: Callable[..., TestClient], instructor: Account) -> TestClient:
    browser = new_client()
    assert login(browser, instructor.username).status_code == 303
    return browser


@pytest.fixture
def learner_account(make_user: Callable[..., Account]) -> Account:
    return make_user("lena", "learner")


@pytest.fixture
def learner_client(new_client: Callable[..., TestClient], learner_account: Account) -> TestClient:
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
