"""Fixtures for exercises: the fixture exercise bank on the real databases."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from tests.factories import EXERCISE_BANK, import_folder


@pytest.fixture
def ex_client(app_client: TestClient, session_factory: sessionmaker[Session]) -> TestClient:
    """The app with the fixture exercise bank loaded."""
    import_folder(session_factory, EXERCISE_BANK)
    return app_client
