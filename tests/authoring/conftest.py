"""Fixtures for authoring: accounts, signed-in clients, and a fast password hasher."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pwdlib import PasswordHash
from pwdlib.hashers.argon2 import Argon2Hasher
from sqlalchemy.orm import Session, sessionmaker

from app.accounts import passwords, service
from app.db import session_scope
from tests.factories import post_account_form

PASSWORD = "correct horse battery staple"


@pytest.fixture(autouse=True)
def fast_hasher(monkeypatch: pytest.MonkeyPatch) -> None:
    """argon2id still, with tiny costs: the recommended ones take ~0.2 s per hash."""
    monkeypatch.setattr(passwords, "password_hasher",
                        PasswordHash((Argon2Hasher(time_cost=1, memory_cost=1024, parallelism=1),)))


@dataclass(frozen=True)
class Account:
    id: int
    username: str
    role: str


@pytest.fixture
def make_user(session_factory: sessionmaker[Session]) -> Callable[..., Account]:
    """Creates an account (committed) and returns its id, name and role."""

    def make(username: str, role: str = "author", password: str = PASSWORD) -> Account:
        with session_scope(session_factory) as s:
            user = service.create_user(db_session=s, username=username, password=password, role=role)
            return Account(user.id, user.username, user.role)

    return make


def login(client: TestClient, username: str, password: str = PASSWORD) -> Any:
    """Sign in through the login form, like a browser."""
    return post_account_form(client, "/login", "form.login-form", username, password)


@pytest.fixture
def new_client(app_client: TestClient) -> Iterator[Callable[..., TestClient]]:
    """More browsers on the same app, each with its own cookies."""
    made: list[TestClient] = []

    def make(base_url: str = "http://testserver") -> TestClient:
        client = TestClient(app_client.app, base_url=base_url)
        made.append(client)
        return client

    yield make
    for c in made:
        c.close()


@pytest.fixture
def author(make_user: Callable[..., Account]) -> Account:
    return make_user("alice", "author")


@pytest.fixture
def admin(make_user: Callable[..., Account]) -> Account:
    return make_user("root", "admin")


@pytest.fixture
def author_client(new_client: Callable[..., TestClient], author: Account) -> TestClient:
    client = new_client()
    assert login(client, author.username).status_code == 303
    return client


@pytest.fixture
def admin_client(new_client: Callable[..., TestClient], admin: Account) -> TestClient:
    client = new_client()
    assert login(client, admin.username).status_code == 303
    return client
