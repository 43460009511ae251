"""Settings come from DDPDRILL_* variables; the secret key is generated once, never a default."""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from app.identity import LEARNER_COOKIE
from app.main import create_app
from app.settings import Settings


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("DDPDRILL_")]:
        monkeypatch.delenv(name)


def test_there_is_no_default_secret_key() -> None:
    assert Settings.model_fields["secret_key"].default is None
    assert Settings().secret_key is None


def test_a_missing_secret_key_is_generated_once_and_kept_in_the_data_dir(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data")
    key = settings.resolved_secret_key()
    stored = tmp_path / "data" / "secret_key"
    assert stored.read_text() == key
    assert len(key) >= 32
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    assert settings.resolved_secret_key() == key
    assert Settings(data_dir=tmp_path / "data").resolved_secret_key() == key


def test_each_installation_generates_its_own_key(tmp_path: Path) -> None:
    one = Settings(data_dir=tmp_path / "one").resolved_secret_key()
    two = Settings(data_dir=tmp_path / "two").resolved_secret_key()
    assert one != two


def test_a_configured_secret_key_wins_and_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DDPDRILL_SECRET_KEY", "from-the-environment")
    settings = Settings(data_dir=tmp_path / "data")
    assert settings.resolved_secret_key() == "from-the-environment"
    assert not (tmp_path / "data").exists()


def test_learners_keep_their_identity_across_a_restart_with_a_generated_key(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    settings = Settings(data_dir=tmp_path / "data", database_url=url, workers=0)
    with TestClient(create_app(settings)) as first:
        first.get("/healthz")
        cookie = first.cookies[LEARNER_COOKIE]
    restarted = Settings(data_dir=tmp_path / "data", database_url=url, workers=0)
    with TestClient(create_app(restarted), cookies={LEARNER_COOKIE: cookie}) as again:
        response = again.get("/healthz")
        assert "set-cookie" not in response.headers


def test_settings_are_read_from_DDPDRILL_variables(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DDPDRILL_DATABASE_URL", "postgresql+psycopg://u@h/db")
    monkeypatch.setenv("DDPDRILL_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("DDPDRILL_PORT", "9001")
    monkeypatch.setenv("DDPDRILL_WORKERS", "0")
    monkeypatch.setenv("DDPDRILL_LOAD_BANK_ON_START", "false")
    monkeypatch.setenv("PORT", "1")  # unprefixed variables are not ours
    settings = Settings()
    assert settings.resolved_database_url == "postgresql+psycopg://u@h/db"
    assert not settings.uses_default_database
    assert (settings.data_dir, settings.port, settings.workers) == (tmp_path, 9001, 0)
    assert settings.load_bank_on_start is False


def test_without_a_database_url_the_database_is_an_sqlite_file_in_the_data_dir(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data")
    assert settings.uses_default_database
    assert settings.resolved_database_url == f"sqlite:///{(tmp_path / 'data' / 'ddpdrill.db').resolve()}"


@pytest.mark.parametrize("value", ["0", "-1", "301", "soon"])
def test_an_impossible_verify_timeout_is_refused(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("DDPDRILL_VERIFY_TIMEOUT_S", value)
    with pytest.raises(ValidationError):
        Settings()


def test_an_empty_secret_key_file_is_replaced_by_a_real_key(tmp_path: Path) -> None:

    (tmp_path / "secret_key").write_text("")
    old = time.time() - 60
    os.utime(tmp_path / "secret_key", (old, old))
    key = Settings(data_dir=tmp_path).resolved_secret_key()
    assert len(key) >= 32
    assert (tmp_path / "secret_key").read_text() == key


def test_processes_starting_together_agree_on_one_key(tmp_path: Path) -> None:

    keys: list[str] = []
    barrier = threading.Barrier(8)

    def start() -> None:
        barrier.wait()
        keys.append(Settings(data_dir=tmp_path).resolved_secret_key())

    threads = [threading.Thread(target=start) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(keys)) == 1 and len(keys) == 8
