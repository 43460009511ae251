"""Regression tests for what a load probe found in authoring: YAML alias bombs and huge fields."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from app.authoring import bankfiles
from app.authoring.schemas import MAX_FIELD_CHARS
from app.questions.bank import load_bank, load_yaml
from app.questions.models import Question
from tests.authoring.helpers import create_question
from tests.factories import FIXTURE_BANK, copy_bank, count, parse

# 467 bytes that expand to 10^7 leaves: the probe's bomb.
ALIAS_BOMB = "\n".join(
    ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    + [f"{chr(ord('a') + i)}: &{chr(ord('a') + i)} [{', '.join(['*' + chr(ord('a') + i - 1)] * 10)}]"
       for i in range(1, 7)]
) + "\n"


def test_load_yaml_refuses_anchors_and_aliases_with_their_line() -> None:
    with pytest.raises(yaml.MarkedYAMLError) as info:
        load_yaml(ALIAS_BOMB)
    assert "anchors and aliases" in str(info.value.problem)
    assert info.value.problem_mark is not None and info.value.problem_mark.line == 0
    assert load_yaml("a: [1, 2]\n") == {"a": [1, 2]}


def test_a_bank_file_with_an_alias_is_an_error_not_an_expansion(tmp_path: Path) -> None:
    bank = copy_bank(tmp_path / "bank")
    path = bank / "basics" / "fixture-multi.yaml"
    nested = "".join(f"  {line}\n" for line in ALIAS_BOMB.splitlines())
    path.write_text(path.read_text() + "\nbomb:\n" + nested)
    loaded = load_bank(bank)
    assert not loaded.ok
    assert any("anchors and aliases" in e.message and e.file.endswith("fixture-multi.yaml")
               for e in loaded.errors), loaded.errors


def test_an_alias_bomb_saved_through_the_editor_is_refused_quickly(author_client: TestClient) -> None:
    # The probe's editor page took 120 s expanding it; refused at parse time (the message
    # says so), it is an ordinary page, well inside the test's timeout.
    response = create_question(author_client, "bomb", knobs=ALIAS_BOMB)
    assert response.status_code == 422
    errors = parse(response).get_text()
    assert "anchors and aliases" in errors


def test_an_alias_bomb_in_an_admin_upload_is_refused(
    admin_client: TestClient, session_factory: sessionmaker[Session], tmp_path: Path,
) -> None:
    files = {f"{p.relative_to(FIXTURE_BANK).as_posix()}": p.read_bytes()
             for p in sorted(FIXTURE_BANK.rglob("*")) if p.is_file()}
    files["basics/fixture-single.yaml"] += ("\nbomb:\n" + "".join(
        f"  {line}\n" for line in ALIAS_BOMB.splitlines())).encode()
    page = parse(admin_client.get("/admin/bank"))
    token = page.select_one("form.upload-form input[name=csrf_token]")["value"]
    response = admin_client.post("/admin/bank/upload", data={"csrf_token": token},
                                 files={"archive": ("bank.zip", bankfiles.to_zip(files))})
    assert response.status_code == 422
    assert "anchors and aliases" in parse(response).get_text()
    assert count(session_factory, Question) == 0


def test_an_editor_field_over_the_cap_is_refused_not_cut(
    author_client: TestClient, session_factory: sessionmaker[Session],
) -> None:
    response = create_question(author_client, "huge", prompt="x" * (MAX_FIELD_CHARS + 1))
    assert response.status_code == 422
    assert f"the limit is {MAX_FIELD_CHARS}" in parse(response).get_text()
    assert count(session_factory, Question) == 0
