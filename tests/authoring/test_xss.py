"""Markup typed into any field is shown as text on every page that shows it.

Real payloads go into every editable field through the editor (tags and usernames,
which do not accept them, are refused with the payload escaped in the error page);
every page and fragment is then parsed and checked for script, event handlers and
javascript: links.
"""

from __future__ import annotations

import io
import zipfile
from typing import Any

import yaml
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from app.settings import Settings
from app.verify.worker import Worker
from tests.authoring.helpers import editor_data, htmx, question_fields
from tests.factories import login, parse, parse_fragment

SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(1)>"
JS_LINK = "[click me](javascript:alert(1))"
SVG = '"><svg onload=alert(1)>'
ALL = f"{SCRIPT} {IMG} {JS_LINK} {SVG} <a href=\"javascript:alert(1)\">x</a> javascript:alert(1)"

TRACE = {
    "kind": "rank_events", "caption": ALL, "columns": [SCRIPT, IMG], "note_heading": SVG,
    "steps": [{"step": SVG, "cells": [ALL, JS_LINK], "note": ALL}],
    "source": {"kind": "illustrative", "note": ALL},
}
KNOBS = {"scale": {"label": ALL, "values": [1, 2], "default": 1},
         "mode": {"label": SVG, "values": [SCRIPT, IMG], "default": SCRIPT}}
EXPECT = [
    {"label": ALL, "when": {"scale": 1}, "value": {"name": "g", "rank": "all", "equals": 1.5},
     "supports": ["b"], "rules_out": ["a", "c", "d"]},
    {"label": SVG, "outcome": "ok"},
]
SNIPPET = (f'report("g", 1.5 * params["scale"])\n'
           f'report({IMG!r}, {SCRIPT!r})  # {SVG}\n'
           f'report("mode", params["mode"])\n')


def assert_neutral(html: BeautifulSoup, where: str) -> None:
    """No script but the vendored htmx, no on* handler, no javascript: URL."""
    for script in html.find_all("script"):
        assert str(script.get("src", "")).startswith("/static/"), (where, str(script)[:200])
    for el in html.find_all(True):
        for attr, value in el.attrs.items():
            assert not attr.lower().startswith("on"), (where, el.name, attr, str(value)[:100])
            if attr.lower() in ("href", "src", "action", "formaction", "xlink:href", "data"):
                text = "".join(str(value).split()).lower()
                assert not text.startswith("javascript:"), (where, el.name, attr, value)
    assert html.select("img[src=x]") == [], where


def test_payloads_in_every_field_are_neutralised_everywhere(
    admin_client: TestClient, client: TestClient, new_client: Any,
    session_factory: sessionmaker[Session], settings: Settings,
) -> None:
    pages: dict[str, BeautifulSoup] = {}
    fields = question_fields(
        "xss", title=ALL[:200], prompt=ALL, explanation=ALL,
        choice_text=[ALL, SCRIPT, IMG, SVG], choice_correct=["1"],
        trace=yaml.safe_dump(TRACE), knobs=yaml.safe_dump(KNOBS), expect=yaml.safe_dump(EXPECT),
        snippet=SNIPPET, note=ALL, type="trace", answer_format="single",
    )
    new = parse(admin_client.get("/author/questions/new"))
    headers = htmx(new)
    created = admin_client.post("/author/questions", data={**fields, "csrf_token":
                                new.select_one("input[name=csrf_token]")["value"]},
                                follow_redirects=False)
    assert created.status_code == 303, parse(created).select("ul.errors")
    # A second revision, so history and diff have payloads on both sides.
    editor = parse(admin_client.get("/author/questions/xss"))
    saved = admin_client.post("/author/questions/xss", follow_redirects=False,
                              data=editor_data(editor, title=SVG, note=SCRIPT))
    assert saved.status_code == 303

    pages["editor"] = parse(admin_client.get("/author/questions/xss"))
    pages["list"] = parse(admin_client.get("/author"))
    pages["list fragment"] = parse_fragment(admin_client.get(
        "/author", headers={"HX-Request": "true", "HX-Target": "question-rows"}))
    pages["history"] = parse(admin_client.get("/author/questions/xss/history"))
    pages["diff"] = parse(admin_client.get("/author/questions/xss/diff?a=1&b=2"))
    for name in ("prompt", "explanation"):
        pages[f"{name} preview"] = parse_fragment(admin_client.post(
            f"/author/preview/markdown?field={name}", headers=headers, data=fields))
    pages["snippet preview"] = parse_fragment(admin_client.post(
        "/author/preview/snippet", headers=headers, data=fields))
    pages["learner preview"] = parse_fragment(admin_client.post(
        "/author/preview/question", headers=headers, data=fields))

    # Run it (knob labels, value names and measured strings), then verify and publish.
    run = parse_fragment(admin_client.post("/author/run", headers=headers,
                                           data={**fields, "knob.mode": f'"{IMG}"'}))
    run_id = run.select_one(".author-run")["data-run-id"]
    admin_client.post("/author/questions/xss/verify", headers=headers)
    worker = Worker(session_factory, settings)
    while worker.run_once():
        pass
    pages["run result"] = parse_fragment(admin_client.get(
        f"/author/runs/{run_id}", params={"expect": fields["expect"]}))
    assert pages["run result"].select("button.expect-button"), "the run should have values"
    pages["expect this"] = parse_fragment(admin_client.post("/author/expect", headers=headers, data={
        "run_id": run_id, "rank": "0", "name": IMG, "expect": fields["expect"]}))
    pages["gate"] = parse_fragment(admin_client.get("/author/questions/xss/gate"))
    assert "passed" in [tr["data-state"] for tr in pages["gate"].select("tr[data-state]")]
    token = pages["gate"].select_one("form.publish-form input[name=csrf_token]")["value"]
    published = admin_client.post("/author/questions/xss/publish", data={"csrf_token": token},
                                  follow_redirects=False)
    assert published.status_code == 303, published.text

    # What learners see.
    pages["learner question"] = parse(client.get("/questions/xss"))
    answer = pages["learner question"].select_one("form.answer-form")
    data = {i["name"]: i.get("value", "") for i in answer.select("input[type=hidden]")}
    pages["learner graded"] = parse(client.post(answer["action"], data={**data, "answer": "b"}))
    pages["topic"] = parse(client.get("/topics/basics"))

    # Fields that refuse markup: tags, usernames; the refusal echoes the payload.
    pages["bad tag"] = parse(admin_client.post(
        "/author/questions/xss", data=editor_data(pages["editor"], tags=SVG)))
    assert "tags" in pages["bad tag"].select_one("ul.errors").find_parent("div").select_one(
        "input")["name"]
    users = parse(admin_client.get("/admin/users"))
    pages["bad username"] = parse(admin_client.post("/admin/users", data={
        "csrf_token": users.select_one("input[name=csrf_token]")["value"], "username": SVG,
        "password": "long enough password", "role": "author"}))
    assert pages["bad username"].select_one("#nu-name")["value"] == SVG
    pages["login echo"] = parse(login(new_client(), ALL[:64], "whatever password"))
    pages["audit"] = parse(admin_client.get("/admin/audit"))
    assert ALL[:64] in pages["audit"].get_text()  # the failed login's username, as text

    # A bank upload whose file name is a payload.
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        archive.writestr(f"basics/{IMG}.yaml", f"slug: '{SVG}'\n")
    bank = parse(admin_client.get("/admin/bank"))
    pages["bank report"] = parse(admin_client.post(
        "/admin/bank/upload", data={"csrf_token": bank.select_one("input[name=csrf_token]")["value"]},
        files={"archive": ("x.zip", buf.getvalue(), "application/zip")}))
    assert IMG in pages["bank report"].get_text()

    for where, html in pages.items():
        assert_neutral(html, where)
    # The payloads are shown as text, not dropped: authors must see what they wrote.
    assert SVG in pages["editor"].select_one("#f-title")["value"]
    assert SCRIPT in pages["editor"].select_one("#f-trace").get_text()
    assert ALL in pages["run result"].get_text() or SVG in pages["run result"].get_text()
    assert SCRIPT in pages["learner question"].get_text()
