"""Accounts, learner identities and the audit log: create, change and authenticate users;
the learner row every feature's records hang from; record who did what.

Only services write audit entries: a view says what happened by calling one.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from app import ratelimit
from app.accounts.models import ROLES, AuditEntry, Learner, User
from app.accounts.passwords import burn_verify, hash_password, verify_and_update
from app.db import utcnow
from app.errors import InvalidInput, RateLimited

USERNAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")
# Long enough that guessing within the login rate limit is hopeless.
MIN_PASSWORD_LENGTH = 10
# Failed logins are counted over this window (settings.login_attempts_per_minute).
LOGIN_WINDOW_SECONDS = 60
# Sign-ups are counted per client address over this window.
SIGNUP_WINDOW_SECONDS = 3600


class AccountError(InvalidInput):
    """A username, password or role that cannot be used."""


# Learner identities -----------------------------------------------------------------------

_LEARNER_EXISTS = select(Learner.id).where(Learner.id == bindparam("learner_id"))
# ON CONFLICT DO NOTHING: a learner's first two requests may arrive together (PostgreSQL
# runs them at once); both must find the row afterwards, neither may fail.
_NEW_LEARNER = {
    "sqlite": sqlite_insert(Learner).on_conflict_do_nothing(index_elements=[Learner.id]),
    "postgresql": pg_insert(Learner).on_conflict_do_nothing(index_elements=[Learner.id]),
}


def ensure_learner(*, db_session: Session, learner_id: str) -> None:
    """Make the learner's row on first sight (an answer, a card or a quiz refers to it)."""
    conn = db_session.connection()
    if conn.execute(_LEARNER_EXISTS, {"learner_id": learner_id}).first() is None:
        conn.execute(_NEW_LEARNER[conn.dialect.name], {"id": learner_id, "created_at": utcnow()})


def account_learner_id(*, db_session: Session, user_id: int) -> str:
    """The learner identity an account owns (the oldest, should there ever be two).

    An account made by an admin or the command line has none until it first practises;
    it then gets a new, empty one, never the browser's anonymous history (only sign-up
    claims that: app.learners.service)."""
    owned = db_session.scalar(select(Learner.id).where(Learner.user_id == user_id)
                              .order_by(Learner.created_at, Learner.id).limit(1))
    if owned is not None:
        return owned
    learner = Learner(id=str(uuid.uuid4()), user_id=user_id)
    db_session.add(learner)
    db_session.flush()
    return learner.id


# Audit log --------------------------------------------------------------------------------


def audit(
    *, db_session: Session, user: User | None, action: str, target: str = "",
    detail: dict[str, Any] | None = None, actor: str | None = None,
) -> AuditEntry:
    """Record who did what to what."""
    entry = AuditEntry(user_id=user.id if user else None,
                       actor=(actor if actor is not None else (user.username if user else "-"))[:64],
                       action=action, target=target[:200], detail=detail or {})
    db_session.add(entry)
    db_session.flush()
    return entry


def list_audit(
    *, db_session: Session, actor: str | None = None, action: str | None = None, limit: int = 200
) -> list[AuditEntry]:
    """The newest audit entries, optionally for one actor or action prefix."""
    stmt = select(AuditEntry).order_by(AuditEntry.created_at.desc(), AuditEntry.id.desc())
    if actor:
        stmt = stmt.where(AuditEntry.actor == actor)
    if action:
        stmt = stmt.where(AuditEntry.action.startswith(action))
    return list(db_session.scalars(stmt.limit(limit)))


# Accounts ---------------------------------------------------------------------------------


def check_password(password: str) -> None:
    if len(password) < MIN_PASSWORD_LENGTH:
        raise AccountError(f"a password needs at least {MIN_PASSWORD_LENGTH} characters")


def create_user(
    *, db_session: Session, username: str, password: str, role: str, by: User | None = None,
    via: str = "",
) -> User:
    """A new active account, audited; raises AccountError for a bad or taken name, role or password.

    `by` is the admin who created it (None for the command line, recorded as actor "cli").
    """
    if not USERNAME_RE.match(username):
        raise AccountError("a username is 1–64 letters, digits and . _ @ -, starting with a letter or digit")
    if role not in ROLES:
        raise AccountError(f"role must be one of {', '.join(ROLES)}")
    check_password(password)
    if get_user_by_name(db_session=db_session, username=username) is not None:
        raise AccountError(f"the username {username!r} is taken")
    user = User(username=username, password_hash=hash_password(password), role=role, active=True)
    db_session.add(user)
    db_session.flush()
    detail = {"role": role, **({"via": via} if via else {})}
    audit(db_session=db_session, user=by, actor=None if by else "cli", action="user.create",
          target=user.username, detail=detail)
    return user


def get_user(*, db_session: Session, user_id: int) -> User | None:
    """The account with this id."""
    return db_session.get(User, user_id)


def get_user_by_name(*, db_session: Session, username: str) -> User | None:
    """The account with this username (case-insensitive)."""
    return db_session.scalar(select(User).where(func.lower(User.username) == username.lower()))


def list_users(*, db_session: Session) -> list[User]:
    """Every account, by name."""
    return list(db_session.scalars(select(User).order_by(User.username)))


def update_user(
    *, db_session: Session, user: User, role: str | None = None, active: bool | None = None,
    password: str | None = None, by: User | None = None,
) -> list[str]:
    """Change an account (audited as done by `by`); any change signs it out everywhere.

    Returns what changed.
    """
    changed = []
    if role is not None and role != user.role:
        if role not in ROLES:
            raise AccountError(f"role must be one of {', '.join(ROLES)}")
        user.role = role
        changed.append(f"role={role}")
    if active is not None and active != user.active:
        user.active = active
        changed.append(f"active={active}")
    if password:
        check_password(password)
        user.password_hash = hash_password(password)
        changed.append("password")
    if changed:
        user.session_version += 1
        db_session.flush()
        audit(db_session=db_session, user=by, action="user.update", target=user.username,
              detail={"changed": changed})
    return changed


def sign_out(*, db_session: Session, user: User) -> None:
    """Sign a user out: every session cookie issued to them stops working. Audited."""
    user.session_version += 1
    db_session.flush()
    audit(db_session=db_session, user=user, action="logout")


@dataclass
class LoginResult:
    user: User | None
    limited: bool = False


def check_signup_rate(*, db_session: Session, client_ip: str, limit: int) -> None:
    """Count a sign-up from this address; RateLimited once `limit` were made in the hour.

    Each sign-up hashes a password (argon2, deliberately slow), so sign-ups are throttled
    per address, across web processes."""
    try:
        ratelimit.hit(db_session=db_session, bucket="signup", key=client_ip, limit=limit,
                      window_s=SIGNUP_WINDOW_SECONDS,
                      message="Too many new accounts from this address; try again in an hour.")
    except RateLimited:
        audit(db_session=db_session, user=None, actor="-", action="signup.limited",
              detail={"ip": client_ip})
        raise


def login_key(username: str, client_ip: str) -> str:
    """The rate limiter's key for sign-ins: failures count per username and address."""
    return f"{username.lower()[:64]}:{client_ip[:64]}"


def authenticate(
    *, db_session: Session, username: str, password: str, client_ip: str, limit: int
) -> LoginResult:
    """The active user these credentials name, or None; `limited` once the rate limit is hit.

    Failures count per (username, client address) in the rate limiter (app.ratelimit), so
    the limit holds across web processes. Every outcome is audited with the address.

    Every attempt is first counted as a failure, and that is committed here, before the
    password hash is checked: the check is slow by design, and on SQLite no
    other request could write meanwhile. A correct password then takes its hit back in
    the request's next transaction.
    """
    ip = {"ip": client_ip}
    try:
        attempt = ratelimit.hit(db_session=db_session, bucket="login",
                                key=login_key(username, client_ip), limit=limit,
                                window_s=LOGIN_WINDOW_SECONDS, message="too many failed sign-ins")
    except RateLimited:
        audit(db_session=db_session, user=None, actor=username, action="login.limited", detail=ip)
        return LoginResult(None, limited=True)
    user = get_user_by_name(db_session=db_session, username=username)
    db_session.commit()
    ok = False
    if user is None or not user.active:
        burn_verify(password)
    else:
        ok, new_hash = verify_and_update(password, user.password_hash)
        if ok and new_hash:
            user.password_hash = new_hash
    if not ok or user is None:
        audit(db_session=db_session, user=None, actor=username, action="login.failed", detail=ip)
        return LoginResult(None)
    ratelimit.forgive(db_session=db_session, hit_id=attempt)
    audit(db_session=db_session, user=user, action="login", detail=ip)
    return LoginResult(user)
