"""Moments in words, for people: "in 4 days", "Thursday", "later today" (all in UTC, the
learning loop's clock)."""

from __future__ import annotations

from datetime import date, datetime, timedelta


def _plural(n: int, unit: str) -> str:
    return f"{n} {unit}{'' if n == 1 else 's'}"


def until(moment: datetime, now: datetime) -> str:
    """How long from `now` to `moment`, roughly: "now", "in 10 minutes", "in 3 hours",
    "tomorrow", "in 4 days", "in 3 weeks"."""
    gap = moment - now
    if gap <= timedelta(seconds=30):
        return "now"
    minutes = round(gap.total_seconds() / 60)
    if minutes < 60:
        return f"in {_plural(max(1, minutes), 'minute')}"
    hours = round(gap.total_seconds() / 3600)
    days = (moment.date() - now.date()).days
    if days == 0 or hours < 12:
        return f"in {_plural(hours, 'hour')}"
    if days == 1:
        return "tomorrow"
    if days < 14:
        return f"in {days} days"
    if days < 60:
        return f"in {round(days / 7)} weeks"
    return f"in {round(days / 30)} months"


def day_name(moment: datetime | date, now: datetime) -> str:
    """The day of `moment` as a person says it: "today", "tomorrow", "Thursday" within the
    week, else "12 Dec" (with the year when it is not this year's)."""
    d = moment.date() if isinstance(moment, datetime) else moment
    days = (d - now.date()).days
    if days == 0:
        return "today"
    if days == 1:
        return "tomorrow"
    if 1 < days < 7:
        return d.strftime("%A")
    return d.strftime("%-d %b") if d.year == now.year else d.strftime("%-d %b %Y")
