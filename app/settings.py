"""Settings, read from the environment with the DDPDRILL_ prefix (see docs/configuration.md)."""

from __future__ import annotations

import secrets
from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_DATA_DIR = Path("data")


class Settings(BaseSettings):
    """Every knob of the app. Each field is documented in docs/configuration.md."""

    model_config = SettingsConfigDict(env_prefix="DDPDRILL_", extra="ignore")

    data_dir: Path = DEFAULT_DATA_DIR
    database_url: str | None = None
    secret_key: str | None = None
    bank_dir: Path = Path("question_bank")
    # Load the bank into an empty database when `serve` starts.
    load_bank_on_start: bool = True

    host: str = "127.0.0.1"
    port: int = 8000

    # In-process verify workers started by `serve`; 0 turns them off.
    workers: int = 1
    # Fresh (uncached) verify runs a learner may start per minute.
    verify_rate_per_minute: int = 20
    # Seconds a worker holds a claimed run before another may take it.
    lease_seconds: float = 30.0

    verify_timeout_s: float = Field(10.0, gt=0, le=300)
    verify_memory_bytes: int = 3 * 1024**3
    verify_cpu_seconds: int = 30
    verify_output_bytes: int = 64 * 1024

    login_attempts_per_minute: int = 10

    @property
    def resolved_database_url(self) -> str:
        """The database URL: the configured one, or an SQLite file in the data dir."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'ddpdrill.db').resolve()}"

    @property
    def uses_default_database(self) -> bool:
        return not self.database_url

    def resolved_secret_key(self) -> str:
        """The signing key: configured, or generated once and kept in the data dir."""
        if self.secret_key:
            return self.secret_key
        path = self.data_dir / "secret_key"
        if path.exists():
            return path.read_text().strip()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        key = secrets.token_urlsafe(48)
        path.touch(mode=0o600)
        path.write_text(key)
        return key


@lru_cache
def get_settings() -> Settings:
    return Settings()
