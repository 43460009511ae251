"""Fixtures for exercises: the fixture exercise bank on the real databases."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from tests.factories import import_folder

EXERCISE_BANK = Path(__file__).resolve().parents[1] / "fixtures" / "exercise_bank"
SLUG = "fixture-exercise"
SOLUTION = (EXERCISE_BANK / "drills" / "solution.py").read_text()
STARTER = (EXERCISE_BANK / "drills" / "starter.py").read_text()


@pytest.fixture
def ex_client(app_client: TestClient, session_factory: sessionmaker[Session]) -> TestClient:
    """The app with the fixture exercise bank loaded."""
    import_folder(session_factory, EXERCISE_BANK)
    return app_client
