"""Accounts: the admin CLI, argon2 hashes, login and logout, the session cookie, the rate limit."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import Result
from fastapi.testclient import TestClient
from pwdlib import PasswordHash
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker
from typer.testing import CliRunner

from app.accounts import passwords
from app.accounts.models import AuditEntry, User
from app.cli import app as cli_app
from app.main import create_app
from app.settings import Settings, get_settings
from tests.factories import PASSWORD, Account, count, form_fields, login, parse

Run = Callable[..., Result]


@pytest.fixture
def ddpdrill(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, database_url: str) -> Iterator[Run]:
    """`ddpdrill ARGS` in-process against the test database, with stdin."""
    for name in [n for n in os.environ if n.startswith("DDPDRILL_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("DDPDRILL_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DDPDRILL_DATABASE_URL", database_url)
    runner = CliRunner()

    def run(*args: str, input: str | None = None) -> Result:
        get_settings.cache_clear()
        try:
            return runner.invoke(cli_app, list(args), input=input, prog_name="ddpdrill")
        finally:
            get_settings.cache_clear()

    yield run


def _user(session_factory: sessionmaker[Session], username: str) -> User | None:
    with session_factory() as s:
        return s.scalar(select(User).where(User.username == username))


def test_admin_create_prompts_for_the_password_twice_without_echo(
    ddpdrill: Run, session_factory: sessionmaker[Session]
) -> None:
    result = ddpdrill("admin", "create", "carol", "--role", "admin",
                      input="a long enough secret\na long enough secret\n")
    assert result.exit_code == 0, result.output
    assert "a long enough secret" not in result.output
    user = _user(session_factory, "carol")
    assert user is not None and user.role == "admin" and user.active
    assert passwords.verify_password("a long enough secret", user.password_hash)
    assert count(session_factory, AuditEntry, AuditEntry.action == "user.create",
                 AuditEntry.actor == "cli") == 1
    listed = ddpdrill("admin", "list")
    assert "carol\tadmin\tactive" in listed.output


def test_admin_create_reads_stdin_and_refuses_bad_input(
    ddpdrill: Run, session_factory: sessionmaker[Session]
) -> None:
    assert ddpdrill("admin", "create", "dave", "--password-stdin",
                    input="another long secret\n").exit_code == 0
    assert _user(session_factory, "dave") is not None and _user(session_factory, "dave").role == "author"
    taken = ddpdrill("admin", "create", "DAVE", "--password-stdin", input="another long secret\n")
    assert taken.exit_code == 1 and "taken" in taken.output
    short = ddpdrill("admin", "create", "erin", "--password-stdin", input="short\n")
    assert short.exit_code == 1 and "at least 10" in short.output
    role = ddpdrill("admin", "create", "erin", "--role", "owner", "--password-stdin", input="x" * 12)
    assert role.exit_code == 2
    mismatch = ddpdrill("admin", "create", "erin", input="one long secret\nother long secret\n"
                        "one long secret\none long secret\n")
    assert mismatch.exit_code == 0 and "do not match" in mismatch.output
    # There is no way to pass the password as an argument.
    assert ddpdrill("admin", "create", "frank", "--password", "x" * 12).exit_code == 2
    assert _user(session_factory, "frank") is None


def test_passwords_are_hashed_with_argon2id(make_user: Callable[..., Account],
                                            session_factory: sessionmaker[Session]) -> None:
    assert "Argon2Hasher" in type(PasswordHash.recommended().hashers[0]).__name__
    make_user("hashy")
    user = _user(session_factory, "hashy")
    assert user is not None and user.password_hash.startswith("$argon2id$")
    assert PASSWORD not in user.password_hash


def test_login_sets_a_httponly_samesite_session_cookie_and_logout_ends_it(
    new_client: Callable[..., TestClient], author: Account, session_factory: sessionmaker[Session]
) -> None:
    client = new_client()
    assert client.get("/author", follow_redirects=False).headers["location"] == "/login?next=%2Fauthor"
    response = login(client, author.username)
    assert response.status_code == 303 and response.headers["location"] == "/author"
    cookie = next(h for h in response.headers.get_list("set-cookie") if h.startswith("ddpdrill_session="))
    flags = {part.strip().lower() for part in cookie.split(";")[1:]}
    assert "httponly" in flags and "samesite=lax" in flags and "path=/" in flags
    assert "secure" not in flags  # plain HTTP here; see the HTTPS test
    stolen = client.cookies.get("ddpdrill_session")
    assert client.get("/author").status_code == 200
    # Sign out through the form on the page.
    page = parse(client.get("/author"))
    action, hidden = form_fields(page, "form[action='/logout']")
    out = client.post(action, data=hidden, follow_redirects=False)
    assert out.status_code == 303
    assert client.get("/author", follow_redirects=False).status_code == 303
    # A copy of the old cookie is dead too: logout bumps the session version.
    thief = new_client()
    thief.cookies.set("ddpdrill_session", stolen)
    assert thief.get("/author", follow_redirects=False).status_code == 303
    with session_factory() as s:
        actions = list(s.scalars(select(AuditEntry.action)
                                 .where(AuditEntry.actor == author.username).order_by(AuditEntry.id)))
    assert actions == ["login", "logout"]


def test_session_cookie_is_secure_over_https(new_client: Callable[..., TestClient],
                                             author: Account) -> None:
    client = new_client(base_url="https://testserver")
    response = login(client, author.username)
    cookie = next(h for h in response.headers.get_list("set-cookie") if h.startswith("ddpdrill_session="))
    assert "secure" in {p.strip().lower() for p in cookie.split(";")}


def test_login_goes_back_to_a_local_page_only(new_client: Callable[..., TestClient],
                                              author: Account) -> None:
    client = new_client()
    for target, expected in (("/author/questions/new", "/author/questions/new"),
                             ("https://evil.example/", "/author"), ("//evil.example/x", "/author")):
        page = parse(client.get("/login", params={"next": target}))
        action, hidden = form_fields(page, "form.login-form")
        response = client.post(action, data={**hidden, "username": author.username,
                                             "password": PASSWORD}, follow_redirects=False)
        assert response.headers["location"] == expected


def test_wrong_password_unknown_user_and_inactive_account_are_refused(
    new_client: Callable[..., TestClient], author: Account, session_factory: sessionmaker[Session]
) -> None:
    client = new_client()
    assert login(client, author.username, "wrong password!").status_code == 401
    assert login(client, "nobody").status_code == 401
    with session_factory.begin() as s:
        s.get(User, author.id).active = False
    refused = login(client, author.username)
    assert refused.status_code == 401
    assert "ddpdrill_session" not in client.cookies
    assert count(session_factory, AuditEntry, AuditEntry.action == "login.failed") == 3


def test_deactivating_an_account_ends_its_sessions(
    author_client: TestClient, author: Account, session_factory: sessionmaker[Session]
) -> None:
    assert author_client.get("/author").status_code == 200
    with session_factory.begin() as s:
        s.get(User, author.id).active = False
    assert author_client.get("/author", follow_redirects=False).status_code == 303


def test_login_is_rate_limited_per_username_and_address(
    settings: Settings, session_factory: sessionmaker[Session], make_user: Callable[..., Account]
) -> None:
    limited = settings.model_copy(update={"login_attempts_per_minute": 3})
    make_user("target")
    make_user("other")
    with TestClient(create_app(limited)) as client:
        for _ in range(3):
            assert login(client, "target", "wrong password!").status_code == 401
        blocked = login(client, "target")  # even the right password waits now
        assert blocked.status_code == 429
        assert blocked.headers["retry-after"] == "60"
        assert "ddpdrill_session" not in client.cookies
        # Another username from the same address is not affected.
        assert login(client, "other").status_code == 303
    # The same username from another address is not affected either.
    with TestClient(create_app(limited), client=("203.0.113.9", 5000)) as elsewhere:
        assert login(elsewhere, "target").status_code == 303
    assert count(session_factory, AuditEntry, AuditEntry.action == "login.limited") == 1


def test_admin_manages_users_and_changes_sign_them_out(
    admin_client: TestClient, new_client: Callable[..., TestClient],
    session_factory: sessionmaker[Session]
) -> None:
    page = parse(admin_client.get("/admin/users"))
    action, hidden = form_fields(page, "form.create-user")
    response = admin_client.post(action, data={**hidden, "username": "newbie", "role": "author",
                                               "password": "newbie's password"},
                                 follow_redirects=False)
    assert response.status_code == 303
    bad = admin_client.post(action, data={**hidden, "username": "newbie", "role": "author",
                                          "password": "newbie's password"})
    assert bad.status_code == 422 and "taken" in bad.text
    newbie = new_client()
    assert login(newbie, "newbie", "newbie's password").status_code == 303
    user = _user(session_factory, "newbie")
    assert user is not None
    page = parse(admin_client.get("/admin/users"))
    form = page.select_one(f"form#user-{user.id}")
    data = {"csrf_token": form.select_one("input[name=csrf_token]")["value"], "role": "admin",
            "active": "1"}
    assert admin_client.post(form["action"], data=data, follow_redirects=False).status_code == 303
    assert _user(session_factory, "newbie").role == "admin"
    # The role change signed newbie out; signing in again gives admin pages.
    assert newbie.get("/admin/users", follow_redirects=False).status_code == 303
    assert login(newbie, "newbie", "newbie's password").status_code == 303
    assert newbie.get("/admin/users").status_code == 200
    # Deactivate (the checkbox left unticked).
    admin_client.post(form["action"], data={**data, "active": None}, follow_redirects=False)
    assert not _user(session_factory, "newbie").active
    assert login(newbie, "newbie", "newbie's password").status_code == 401
    audit = parse(admin_client.get("/admin/audit?action=user."))
    rows = [[td.get_text() for td in tr.select("td")][1:4] for tr in audit.select("table.audit tbody tr")]
    assert ["root", "user.update", "newbie"] in rows and ["root", "user.create", "newbie"] in rows


def test_an_admin_cannot_lock_themselves_out(admin_client: TestClient, admin: Account) -> None:
    page = parse(admin_client.get("/admin/users"))
    form = page.select_one(f"form#user-{admin.id}")
    response = admin_client.post(form["action"], data={
        "csrf_token": form.select_one("input[name=csrf_token]")["value"], "role": "author", "active": "1"})
    assert response.status_code == 422
    assert admin_client.get("/admin/users").status_code == 200
