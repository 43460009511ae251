"""The app's routers are included in one order (app/main.py), and that order must not matter:
no path one of them serves is also matched by a route of another, so whichever comes first,
a request reaches the same view."""

from __future__ import annotations

import re
from typing import Any

from fastapi import FastAPI
from starlette.routing import Mount

from app.main import create_app
from app.settings import Settings


def _groups(app: FastAPI) -> list[list[Any]]:
    """The app's routes, grouped as included: one group per router, one per route added to
    the app itself."""
    def flat(entry: Any) -> list[Any]:
        inner = getattr(entry, "original_router", None)  # an included router
        return [r for sub in inner.routes for r in flat(sub)] if inner is not None else [entry]

    return [flat(entry) for entry in app.router.routes]


def _example(path: str) -> str:
    """A concrete path the template serves: each parameter replaced by a plain word."""
    return re.sub(r"\{[^}]+\}", "x1", path)


def test_no_path_is_served_by_routes_of_two_routers(settings: Settings) -> None:
    app = create_app(settings)
    routes = [(i, route) for i, group in enumerate(_groups(app)) for route in group
              if not isinstance(route, Mount)]
    assert len(routes) > 50
    clashes = []
    for i, a in routes:
        for j, b in routes:
            if i == j or not (set(a.methods or ()) & set(b.methods or ())):
                continue
            if b.path_regex.match(_example(a.path)):
                clashes.append(f"{sorted(a.methods)} {a.path} is also matched by {b.path}")
    assert clashes == []
