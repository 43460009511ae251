"""The one clock of the learning loop: what "now" is for review scheduling and due cards.

Views take it as `ClockDep` (app/deps.py) and hand `now` to the services, which never
read the wall clock themselves; so a test moves time by moving a clock, not by sleeping.

- `Clock`: the real time, shifted by `DDPDRILL_CLOCK_OFFSET_FILE` when that (test-only)
  setting names a file: the file holds seconds to add, re-read on every call, so a
  browser test can move a live server a day forward by writing "86400" into it.
  Unset (the default) the clock is exactly `datetime.now(UTC)`.
- `FixedClock`: a clock that stands still until a test advances it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path


class Clock:
    """The wall clock in UTC, plus an optional offset read from a file (tests only)."""

    def __init__(self, offset_file: Path | None = None) -> None:
        self.offset_file = offset_file

    def offset(self) -> timedelta:
        """The current test offset; nothing (or anything unreadable) is no offset."""
        if self.offset_file is None:
            return timedelta(0)
        try:
            return timedelta(seconds=float(self.offset_file.read_text().strip() or 0))
        except (OSError, ValueError, OverflowError):
            return timedelta(0)

    def now(self) -> datetime:
        return datetime.now(UTC) + self.offset()


class FixedClock(Clock):
    """A clock for tests: it says `at` until advanced."""

    def __init__(self, at: datetime) -> None:
        super().__init__(None)
        self.at = at if at.tzinfo else at.replace(tzinfo=UTC)

    def advance(self, delta: timedelta) -> None:
        self.at += delta

    def now(self) -> datetime:
        return self.at
