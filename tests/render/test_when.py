"""Moments in words: what the Review page says instead of a timestamp."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.render.when import day_name, until

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)  # a Monday


@pytest.mark.parametrize(("later", "words", "day"), [
    (timedelta(seconds=10), "now", "today"),
    (timedelta(minutes=1), "in 1 minute", "today"),
    (timedelta(minutes=10), "in 10 minutes", "today"),
    (timedelta(hours=3), "in 3 hours", "today"),
    (timedelta(hours=16), "tomorrow", "tomorrow"),
    (timedelta(days=3), "in 3 days", "Thursday"),
    (timedelta(days=20), "in 3 weeks", "22 Mar"),
    (timedelta(days=300), "in 10 months", "27 Dec"),
    (timedelta(days=400), "in 13 months", "6 Apr 2027"),
])
def test_a_moment_is_said_as_a_person_would(later: timedelta, words: str, day: str) -> None:
    assert until(NOW + later, NOW) == words
    assert day_name(NOW + later, NOW) == day
