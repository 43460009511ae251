"""Passwords: argon2id hashes, and a check that takes as long for an unknown user."""

from __future__ import annotations

from functools import lru_cache

from pwdlib import PasswordHash

# argon2id with pwdlib's recommended parameters. Tests swap in cheaper parameters
# of the same algorithm (tests/conftest.py) to stay fast.
password_hasher = PasswordHash.recommended()


def hash_password(password: str) -> str:
    return str(password_hasher.hash(password))


def verify_password(password: str, password_hash: str) -> bool:
    try:
        return bool(password_hasher.verify(password, password_hash))
    except Exception:  # an unknown or corrupt hash is a failed login, not a crash
        return False


def verify_and_update(password: str, password_hash: str) -> tuple[bool, str | None]:
    """(matches, a fresh hash when the stored one uses outdated parameters)."""
    try:
        ok, new_hash = password_hasher.verify_and_update(password, password_hash)
    except Exception:  # a corrupt stored hash is a failed login
        return False, None
    return bool(ok), new_hash


@lru_cache(maxsize=4)
def _dummy_hash(hasher_id: int) -> str:
    return password_hasher.hash("not-a-real-password")


def burn_verify(password: str) -> None:
    """Spend the time a real check takes, so an unknown username is not faster to reject."""
    verify_password(password, _dummy_hash(id(password_hasher)))
