"""The limits every run is held to (defaults match app.settings)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

MAX_TIMEOUT_S = 600.0
# Importing torch and running a DDP step needs ~740 MiB of address space per rank.
MIN_MEMORY_BYTES = 1024**3
# Threads count too: eight DDP ranks have 32 between them.
MIN_PROCESSES = 48


@dataclass(frozen=True)
class Limits:
    """Per-run limits. The engine takes them explicitly; it never reads global settings."""

    # Wall clock for the whole run, start-up included.
    timeout_s: float = 10.0
    # RLIMIT_AS per rank.
    memory_bytes: int = 3 * 1024**3
    # RLIMIT_CPU per rank (SIGXCPU, then SIGKILL a second later).
    cpu_seconds: float = 30.0
    # Per rank and per stream (stdout, stderr): the first this many bytes are kept,
    # the rest is read and discarded. The run goes on.
    output_bytes: int = 64 * 1024
    # Processes and threads of the whole run together (RLIMIT_NPROC of the run's own uid;
    # sandboxed runs only). Eight DDP ranks use 32 (four threads each).
    processes: int = 128
    # The run's scratch folder (a tmpfs; sandboxed runs only).
    scratch_bytes: int = 64 * 1024**2
    # Scheduling niceness of every rank (0 normal, 19 lowest). The caller lowers learners'
    # own code so that a spinning submission cannot slow the bank's runs or another's.
    nice: int = 0

    def __post_init__(self) -> None:
        if not (0 < self.timeout_s <= MAX_TIMEOUT_S) or math.isnan(self.timeout_s):
            raise ValueError(f"timeout_s must be in (0, {MAX_TIMEOUT_S:g}], not {self.timeout_s}")
        if self.memory_bytes < MIN_MEMORY_BYTES:
            raise ValueError(f"memory_bytes must be at least {MIN_MEMORY_BYTES} (1 GiB): torch "
                             "alone needs most of that")
        if not self.cpu_seconds > 0:
            raise ValueError("cpu_seconds must be positive")
        if self.output_bytes < 1024:
            raise ValueError("output_bytes must be at least 1024")
        if self.processes < MIN_PROCESSES:
            raise ValueError(f"processes must be at least {MIN_PROCESSES}: eight ranks need that many")
        if self.scratch_bytes < 64 * 1024:
            raise ValueError("scratch_bytes must be at least 65536")
        if not 0 <= self.nice <= 19:
            raise ValueError("nice must be between 0 and 19")

    @classmethod
    def from_settings(cls, settings: Any) -> Limits:
        """The limits configured in app.settings.Settings (verify_* fields)."""
        return cls(
            timeout_s=float(settings.verify_timeout_s),
            memory_bytes=int(settings.verify_memory_bytes),
            cpu_seconds=float(settings.verify_cpu_seconds),
            output_bytes=int(settings.verify_output_bytes),
            processes=int(settings.verify_processes),
            scratch_bytes=int(settings.verify_scratch_bytes),
        )

    @property
    def pg_timeout_s(self) -> float:
        """The gloo group's timeout: a little shorter than the run's, so gloo raises first."""
        return self.timeout_s - min(2.0, 0.2 * self.timeout_s)

    def as_dict(self) -> dict[str, int | float]:
        return {
            "timeout_s": self.timeout_s,
            "pg_timeout_s": round(self.pg_timeout_s, 3),
            "memory_bytes": self.memory_bytes,
            "cpu_seconds": self.cpu_seconds,
            "output_bytes": self.output_bytes,
            "processes": self.processes,
            "scratch_bytes": self.scratch_bytes,
            "nice": self.nice,
        }
