"""Helpers for the classes tests: drive the class pages through their forms, like a browser."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from fastapi.testclient import TestClient

from tests.factories import T0, form_fields, parse

FORM_TIME = "%Y-%m-%dT%H:%M"


def make_class(client: TestClient, name: str = "Distributed training, spring") -> int:
    """Make a class through the "New class" form; returns its id."""
    action, hidden = form_fields(parse(client.get("/classes")), "form.new-class-form")
    r = client.post(action, data={**hidden, "name": name}, follow_redirects=False)
    assert r.status_code == 303, r.text
    return int(r.headers["location"].rsplit("/", 1)[1])


def join_path(client: TestClient, class_id: int) -> str:
    """The class's join link as shown on its page (its path)."""
    link = parse(client.get(f"/classes/{class_id}")).select_one("#join-url")
    assert link is not None, "the class has no live join link"
    return urlsplit(link.get_text(strip=True)).path


def when(at: datetime) -> str:
    return at.strftime(FORM_TIME)


def add_assignment(client: TestClient, class_id: int, *, title: str = "Week 1", kind: str = "quiz",
                   opens: datetime = T0, due: datetime = T0 + timedelta(days=7),
                   **fields: Any) -> Any:
    """Submit the new-assignment form (fields: topics, count, questions, exercises, minutes,
    variant-<slug>); returns the response."""
    page = parse(client.get(f"/classes/{class_id}/assignments/new"))
    action, hidden = form_fields(page, "form.assignment-form")
    data: dict[str, Any] = {**hidden, "title": title, "kind": kind, "opens_at": when(opens),
                            "due_at": when(due), **fields}
    return client.post(action, data=data, follow_redirects=False)


def join(client: TestClient, path: str) -> Any:
    """Press "Join the class" on the join page."""
    action, hidden = form_fields(parse(client.get(path)), "form.join-form")
    return client.post(action, data=hidden, follow_redirects=False)


def post_form(client: TestClient, page_path: str, selector: str, **data: Any) -> Any:
    """Submit the form `selector` of a page with its hidden fields and `data`."""
    action, hidden = form_fields(parse(client.get(page_path)), selector)
    return client.post(action, data={**hidden, **data}, follow_redirects=False)


def csrf_of(client: TestClient) -> str:
    """This browser's CSRF token, as its pages' forms carry it."""
    field = parse(client.get("/login")).select_one("input[name=csrf_token]")
    assert field is not None
    return str(field["value"])
