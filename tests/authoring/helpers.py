"""Helpers for authoring tests: editor forms as a browser submits them."""

from __future__ import annotations

from typing import Any

from bs4 import BeautifulSoup, Tag
from fastapi.testclient import TestClient
from httpx2 import Response

from tests.factories import parse

SNIPPET = 'report("g", 1.5 * params["scale"])\n'
KNOBS = "scale:\n  label: Input scale\n  values: [1, 2]\n  default: 1\n"
# The first check binds the key of question_fields (b, "The mean") to the measurement.
EXPECT_PASS = ("- label: mean on every rank\n  when: {scale: 1}\n  value: {name: g, rank: all, equals: 1.5}\n"
               "  supports: [b]\n  rules_out: [a, c]\n"
               "- label: the run completes\n  outcome: ok\n")
EXPECT_FAIL = ("- label: wrong on purpose\n  value: {name: g, rank: all, equals: 99}\n"
               "  supports: [b]\n  rules_out: [a, c]\n")


def serialize(form: Tag) -> list[tuple[str, str]]:
    """A form's successful controls in document order, as a browser would send them."""
    out: list[tuple[str, str]] = []
    for el in form.find_all(["input", "textarea", "select"]):
        name = el.get("name")
        if not name or el.has_attr("disabled"):
            continue
        if el.name == "textarea":
            out.append((str(name), el.get_text()))
        elif el.name == "select":
            opt = el.find("option", selected=True) or el.find("option")
            if opt is not None:
                out.append((str(name), str(opt.get("value", opt.get_text()))))
        else:
            kind = el.get("type", "text")
            if kind in ("checkbox", "radio"):
                if el.has_attr("checked"):
                    out.append((str(name), str(el.get("value", "on"))))
            elif kind not in ("submit", "button", "file", "image", "reset"):
                out.append((str(name), str(el.get("value", ""))))
    return out


def to_data(pairs: list[tuple[str, str]]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for k, v in pairs:
        data.setdefault(k, []).append(v)
    return {k: v[0] if len(v) == 1 else v for k, v in data.items()}


def editor_data(page: BeautifulSoup, **changes: Any) -> dict[str, Any]:
    """The editor form's fields with some replaced (a list value replaces every same-named one)."""
    form = page.select_one("form#editor")
    assert form is not None, "no editor form on the page"
    data = to_data(serialize(form))
    for k, v in changes.items():
        if v is None:
            data.pop(k, None)
        else:
            data[k] = v
    return data


def question_fields(slug: str, **changes: Any) -> dict[str, Any]:
    """A valid single-choice question with a snippet, as the editor's fields."""
    data: dict[str, Any] = {
        "slug": slug, "topic": "basics", "title": f"Title of {slug}", "tags": "ddp, grads",
        "difficulty": "2", "type": "single", "answer_format": "",
        "prompt": "What does **DDP** leave in `.grad`?",
        "choice_text": ["The sum", "The mean", "The local value", ""], "choice_correct": ["1"],
        "explanation": "The reducer divides by the world size.",
        "trace": "", "snippet": SNIPPET, "snippet_file": "", "world_size": "2", "timeout_s": "10",
        "knobs": KNOBS, "audit": "default", "expect": EXPECT_PASS, "note": "first draft",
    }
    for k, v in changes.items():
        if v is None:
            data.pop(k, None)
        else:
            data[k] = v
    return data


def create_question(client: TestClient, slug: str, **changes: Any) -> Response:
    """Open the new-question page and submit it with these fields."""
    page = parse(client.get("/author/questions/new"))
    hidden = {"csrf_token": page.select_one("form#editor input[name=csrf_token]")["value"]}
    return client.post("/author/questions", data={**hidden, **question_fields(slug, **changes)},
                       follow_redirects=False)


def save_editor(client: TestClient, slug: str, **changes: Any) -> Response:
    """Open a question's editor and save it with some fields changed."""
    page = parse(client.get(f"/author/questions/{slug}"))
    return client.post(f"/author/questions/{slug}", data=editor_data(page, **changes),
                       follow_redirects=False)


def htmx(page: BeautifulSoup) -> dict[str, str]:
    import json

    headers = {"HX-Request": "true"}
    body = page.body
    if body is not None and body.get("hx-headers"):
        headers.update(json.loads(str(body["hx-headers"])))
    return headers


def csrf_of(client: TestClient) -> str:
    """This browser's CSRF token, read from a page's form."""
    page = parse(client.get("/login"))
    return str(page.select_one("input[name=csrf_token]")["value"])
