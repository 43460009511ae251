"""The answer key never reaches the browser before the learner answers, for every question type.

Two complementary checks. The first looks for the fixture bank's markers: explanations
are SENTINEL-EXPLANATION-*, and nothing may say which choice is right (the right choice's
text is visible, as every choice's is). The second changes only the answer key (which
choices are right, the numeric value, the explanation) and requires the pages and the
API to be byte-for-byte the same: whatever a page shows, it is not derived from the key.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from bs4 import BeautifulSoup, Comment
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from tests.factories import FIXTURE, FIXTURE_BANK, copy_bank, import_folder, parse

SLUGS = sorted(FIXTURE)
# Words that would give the key away if a page carried them before answering.
KEY_WORDS = re.compile(r"correct|explanation|solution|answer[-_]?key|SENTINEL-EXPLANATION", re.I)
EXPECTATION_LABEL = "mean on every rank"  # fixture-single's verify expectation
QUIZ_FILTERS = {"fixture-single": ("basics", "1"), "fixture-multi": ("basics", "2"),
                "fixture-numeric": ("basics", "3"), "fixture-trace-join": ("traces", "2"),
                "fixture-trace-buckets": ("traces", "3")}


def _quiz_page(client: TestClient, slug: str) -> str:
    topic, difficulty = QUIZ_FILTERS[slug]
    home = parse(client.get("/topics"))
    csrf = home.select_one("form.quiz-form input[name=csrf_token]")["value"]
    response = client.post("/quizzes", data={"csrf_token": csrf, "topics": topic,
                                             "difficulty": difficulty, "count": "1"})
    assert response.status_code == 200
    return response.text


def _unanswered_html(client: TestClient, slug: str) -> dict[str, str]:
    pages = {"question page": client.get(f"/questions/{slug}").text,
             "quiz page": _quiz_page(client, slug),
             "topic page": client.get(f"/topics/{FIXTURE[slug]['topic']}").text,
             "home page": client.get("/").text, "topics page": client.get("/topics").text}
    script = client.get(f"/questions/{slug}/torchrun.py")
    if script.status_code == 200:
        pages["torchrun script"] = script.text
    return pages


def _assert_no_key_in_html(html: str, slug: str, where: str) -> None:
    assert "SENTINEL-EXPLANATION" not in html, where
    assert EXPECTATION_LABEL not in html, where
    soup = BeautifulSoup(html, "lxml")
    for comment in soup.find_all(string=lambda s: isinstance(s, Comment)):
        assert not KEY_WORDS.search(comment), (where, comment)
    for tag in soup.find_all(True):
        for name, value in tag.attrs.items():
            value = " ".join(value) if isinstance(value, list) else str(value)
            assert not KEY_WORDS.search(name), (where, tag.name, name)
            assert not KEY_WORDS.search(value), (where, tag.name, name, value)
            assert "SENTINEL" not in value, (where, tag.name, name, value)
    assert soup.select("section.graded, .choices-graded, .explanation") == [], where
    for hidden in soup.select("input[type=hidden]"):
        assert hidden["name"] not in ("answer", "key", "score"), where
    choices = soup.select("form.answer-form input[name=answer]")
    if choices and choices[0].get("type") in ("radio", "checkbox"):
        # The right choice's input and label look exactly like the wrong ones.
        shapes = {tuple(sorted((k, str(v)) for k, v in c.attrs.items() if k != "value")) for c in choices}
        assert len(shapes) == 1, (where, shapes)
        labels = {tuple(sorted((k, str(v)) for k, v in c.parent.attrs.items())) for c in choices}
        assert len(labels) == 1, where
    elif choices:
        assert choices[0].get("value", "") == "", where


def _assert_no_key_in_json(data: Any, where: str) -> None:
    if isinstance(data, dict):
        for key, value in data.items():
            assert not KEY_WORDS.search(key), (where, key)
            _assert_no_key_in_json(value, where)
    elif isinstance(data, list):
        for value in data:
            _assert_no_key_in_json(value, where)
    elif isinstance(data, str):
        assert "SENTINEL-EXPLANATION" not in data and EXPECTATION_LABEL not in data, where


def test_pages_before_answering_carry_no_answer_key_for_any_question_type(client: TestClient) -> None:
    for slug in SLUGS:
        for where, html in _unanswered_html(client, slug).items():
            _assert_no_key_in_html(html, slug, f"{slug} {where}")


def test_api_questions_carry_no_answer_key_for_any_question_type(client: TestClient) -> None:
    for slug in SLUGS:
        response = client.get(f"/api/v1/questions/{slug}")
        assert response.status_code == 200
        data = response.json()
        _assert_no_key_in_json(data, slug)
        for choice in data["choices"]:
            assert set(choice) == {"key", "text"}
    listing = client.get("/api/v1/questions").json()
    _assert_no_key_in_json(listing, "list")


def test_openapi_question_schema_has_no_answer_key_fields(client: TestClient) -> None:
    schemas = client.get("/api/v1/openapi.json").json()["components"]["schemas"]
    for name in ("QuestionOut", "QuestionSummaryOut", "ChoiceOut"):
        assert not [p for p in schemas[name]["properties"] if KEY_WORDS.search(p)], name


def _rekey(bank_dir: Path) -> None:
    """Change only the answer keys and explanations of the fixture bank."""
    new_right = {"fixture-single": {"c"}, "fixture-multi": {"c"}, "fixture-trace-join": {"b"}}
    new_value = {"fixture-numeric": 1500, "fixture-trace-buckets": 9}
    for path in bank_dir.glob("*/fixture-*.yaml"):
        data = yaml.safe_load(path.read_text())
        slug = data["slug"]
        data["explanation"] = data["explanation"].replace("SENTINEL-EXPLANATION", "OTHER-REASON")
        if slug in new_right:
            for key, choice in zip("abcd", data["choices"], strict=False):
                choice.pop("correct", None)
                if key in new_right[slug]:
                    choice["correct"] = True
            # The expectations' binding moves with the key (the loader rejects a key that
            # disagrees with it); a learner must not be able to see that it moved either.
            keys = list("abcd"[: len(data["choices"])])
            for expectation in (data.get("verify") or {}).get("expect", []):
                if "supports" in expectation or "rules_out" in expectation:
                    expectation["supports"] = sorted(new_right[slug])
                    expectation["rules_out"] = [k for k in keys if k not in new_right[slug]]
        else:
            data["answer"]["value"] = new_value[slug]
        path.write_text(yaml.safe_dump(data, sort_keys=False))


def _normalised(client: TestClient, slug: str) -> dict[str, str]:
    pages = {where: html for where, html in _unanswered_html(client, slug).items() if where != "quiz page"}
    out = {}
    for where, html in pages.items():
        soup = BeautifulSoup(html, "lxml")
        # A form token, and the revision the Verify form runs, differ between imports
        # whatever changed; neither says anything about the answer.
        for token in soup.select("input[name=token], input[name=rev]"):
            token["value"] = "…"
        out[where] = str(soup)
    api = client.get(f"/api/v1/questions/{slug}").json()
    api.pop("revision")
    out["api"] = json.dumps(api, sort_keys=True)
    return out


def test_changing_only_the_answer_key_changes_nothing_a_learner_sees_before_answering(
    client: TestClient, session_factory: sessionmaker[Session], tmp_path: Path
) -> None:
    before = {slug: _normalised(client, slug) for slug in SLUGS}
    bank_dir = copy_bank(tmp_path / "bank", FIXTURE_BANK)
    _rekey(bank_dir)
    assert sorted(import_folder(session_factory, bank_dir).updated) == SLUGS

    after = {slug: _normalised(client, slug) for slug in SLUGS}

    for slug in SLUGS:
        for where in before[slug]:
            assert before[slug][where] == after[slug][where], f"{slug} {where} depends on the answer key"
