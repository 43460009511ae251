"""Settings, read from the environment with the DDPDRILL_ prefix (see docs/configuration.md)."""

from __future__ import annotations

import ipaddress
import os
import secrets
import time
from functools import lru_cache
from pathlib import Path

from pydantic import Field, PrivateAttr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_DATA_DIR = Path("data")
# A generated key is 64 characters; anything much shorter in the file is damage.
MIN_SECRET_CHARS = 32


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
    # The address learners reach the app at, e.g. https://drill.example.org: every absolute
    # link the app hands out (a mock report's share link) starts with it, never with the
    # request's Host header, which a client controls. Unset: http://HOST:PORT.
    public_base_url: str | None = None
    # Reverse proxies whose X-Forwarded-For the app believes (uvicorn's forwarded_allow_ips,
    # comma-separated addresses or "*"). Unset: none, the TCP peer is the client.
    forwarded_allow_ips: str | None = None
    # Host headers the app answers (Starlette's TrustedHostMiddleware), comma-separated;
    # "*" answers any. Set it to the public name(s) when the app is reachable from outside.
    allowed_hosts: str = "*"
    # Client networks that may read /metrics, comma-separated CIDRs ("*" for everyone):
    # the queue's state and request timings are for the operator, not the public.
    metrics_allow: str = "127.0.0.0/8,::1/128"
    # Web processes `serve` runs on its one port (see docs/deploy.md).
    processes: int = Field(1, ge=1, le=64)

    # Threads that run views (each holds at most one database connection, so the
    # database pool is sized from this); see "Sizing" in docs/configuration.md.
    threads: int = Field(32, ge=1, le=1000)
    # Requests that may write (any method but GET and HEAD) running in view threads at once,
    # per web process; more wait in order of arrival (see "Sizing" in docs/configuration.md).
    write_threads: int = Field(2, ge=1, le=1000)
    # Requests inside the app at once; more wait up to `admission_wait_s`, then get 503.
    max_requests_in_flight: int = Field(256, ge=1)
    admission_wait_s: float = Field(5.0, ge=0)

    # In-process verify workers started by `serve`; 0 turns them off. With 2 or more, one
    # takes only the bank's shared runs, so learners' own code never delays their Verify.
    workers: int = Field(3, ge=0, le=16)
    # Fresh (uncached) verify runs a learner may start per minute.
    verify_rate_per_minute: int = 20
    # Runs of a learner's own exercise code per minute (one Run costs one per audited
    # combination); the per-address budget is four times this.
    exercise_rate_per_minute: int = 30
    # Private runs (learners' exercise code, authors' Run now) that may wait at once: for
    # one learner or author, for one client address, and in all (see docs/verify-service.md).
    private_queue_per_owner: int = Field(8, ge=1)
    private_queue_per_address: int = Field(24, ge=1)
    private_queue_total: int = Field(200, ge=1)
    # Fresh runs an author's Run now and Verify all may start per minute.
    author_run_rate_per_minute: int = Field(30, ge=1)
    # Seconds a worker holds a claimed run before another may take it; renewed three
    # times per lease, so a killed worker's run is taken again within about this long.
    lease_seconds: float = Field(3.0, gt=0)

    verify_timeout_s: float = Field(10.0, gt=0, le=300)
    verify_memory_bytes: int = 3 * 1024**3
    verify_cpu_seconds: int = 30
    verify_output_bytes: int = 64 * 1024
    verify_processes: int = 128
    verify_scratch_bytes: int = 64 * 1024**2
    # Run snippets inside the namespace sandbox (docs/sandbox.md). Off only by choice.
    sandbox: bool = True

    login_attempts_per_minute: int = 10

    # Learner accounts one client address may create per hour.
    signups_per_hour: int = 10
    # Problem reports one learner may file per hour.
    reports_per_hour: int = 10
    # Test-only: a file holding seconds to add to the clock (app/clock.py). Never set it in
    # production: anyone who can write the file moves every learner's review schedule.
    clock_offset_file: Path | None = None

    _generated_key: str | None = PrivateAttr(default=None)

    @field_validator("metrics_allow")
    @classmethod
    def _networks(cls, value: str) -> str:
        for part in (p.strip() for p in value.split(",")):
            if part and part != "*":
                try:
                    ipaddress.ip_network(part, strict=False)
                except ValueError:
                    raise ValueError(f"{part!r} is not a network (CIDR such as 10.0.0.0/8)") from None
        return value

    @field_validator("public_base_url")
    @classmethod
    def _base_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value

    @property
    def resolved_database_url(self) -> str:
        """The database URL: the configured one, or an SQLite file in the data dir."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'ddpdrill.db').resolve()}"

    @property
    def base_url(self) -> str:
        """Where absolute links point: the configured public address, else the bound one."""
        return (self.public_base_url or f"http://{self.host}:{self.port}").rstrip("/")

    @property
    def allowed_host_list(self) -> list[str]:
        return [h.strip() for h in self.allowed_hosts.split(",") if h.strip()] or ["*"]

    @property
    def uses_default_database(self) -> bool:
        return not self.database_url

    def resolved_secret_key(self) -> str:
        """The signing key: configured, or generated once and kept in the data dir.

        Two processes starting at once on a new data dir must agree on one key, so
        the file is created exclusively; the loser reads the winner's key.
        """
        if self.secret_key:
            return self.secret_key
        if self._generated_key:
            return self._generated_key
        path = self.data_dir / "secret_key"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        for _ in range(50):
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                key = path.read_text().strip()
                if len(key) >= MIN_SECRET_CHARS:
                    self._generated_key = key
                    return key
                if time.time() - path.stat().st_mtime > 5:
                    path.unlink(missing_ok=True)  # an empty or truncated key: make a new one
                time.sleep(0.05)  # or its writer is still writing it
                continue
            key = secrets.token_urlsafe(48)
            with os.fdopen(fd, "w") as f:
                f.write(key)
            self._generated_key = key
            return key
        raise RuntimeError(f"could not read or create the secret key at {path}")


@lru_cache
def get_settings() -> Settings:
    return Settings()
