"""The fixture exercise bank's one exercise: its slug, its reference solution and starter."""

from __future__ import annotations

from tests.factories import EXERCISE_BANK

SLUG = "fixture-exercise"
SOLUTION = (EXERCISE_BANK / "drills" / "solution.py").read_text()
STARTER = (EXERCISE_BANK / "drills" / "starter.py").read_text()
