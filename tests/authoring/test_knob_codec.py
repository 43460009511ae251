"""One knob codec (app.verify.knobs) behind every entry point: the learner's Verify form, the
editor's Run now, the JSON API and the CLI all run exactly the value chosen."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.questions.bank import load_bank
from app.verify import knobs
from app.verify.models import Run
from tests.authoring.helpers import editor_data
from tests.factories import answered, htmx_headers, import_folder, parse

# Values that a lossy codec gets wrong: non-ASCII, nested lists, booleans next to numbers.
VALUES: list[Any] = ["größe", "plain", [[3, 2], [1]], True, False, 1, 2.5]

QUESTION = """\
slug: codec-check
topic: codec
title: Knob values survive every entry point
difficulty: 1
type: single
prompt: Which value ran?
choices:
  - text: the chosen one
    correct: true
  - text: the default
explanation: The codec keeps the value.
explained:
  a: the run only reports the value; it does not grade choices
  b: the run only reports the value; it does not grade choices
verify:
  snippet: codec_check.py
  knobs:
    value:
      values: {values}
      default: {default}
  expect:
    - label: ran
      outcome: ok
"""


@pytest.fixture
def codec_question(tmp_path: Path, session_factory: sessionmaker[Session]) -> str:
    folder = tmp_path / "bank" / "codec"
    folder.mkdir(parents=True)
    (folder / "codec-check.yaml").write_text(
        QUESTION.format(values=json.dumps(VALUES, ensure_ascii=False), default="plain"), encoding="utf-8")
    (folder / "codec_check.py").write_text('report("value", params["value"])\n')
    import_folder(session_factory, tmp_path / "bank")
    return "codec-check"


def _last_run_params(session_factory: sessionmaker[Session]) -> dict[str, Any]:
    with session_factory() as s:
        run = s.scalars(select(Run).order_by(Run.id.desc()).limit(1)).one()
        return dict(run.params)


def test_encode_then_decode_is_the_identity_for_every_kind_of_value() -> None:
    for value in VALUES:
        assert knobs.decode(knobs.encode(value)) == value
        assert type(knobs.decode(knobs.encode(value))) is type(value)
    assert knobs.encode("größe") == '"größe"'  # not \\u-escaped: the same text everywhere


def test_resolve_refuses_true_for_one_and_accepts_two_point_zero_for_two(tmp_path: Path) -> None:
    folder = tmp_path / "b" / "t"
    folder.mkdir(parents=True)
    (folder / "q.yaml").write_text(QUESTION.replace("codec-check", "q").replace("codec_check", "q")
                                   .replace("topic: codec", "topic: t")
                                   .format(values="[1, 2, true]", default=1))
    (folder / "q.py").write_text("pass\n")
    bank = load_bank(tmp_path / "b")
    assert bank.ok, [str(e) for e in bank.errors]
    doc = bank.questions[0]
    assert doc.verify is not None
    assert knobs.resolve(doc.verify, {"value": 2.0})[1]["value"] == 2
    assert knobs.resolve(doc.verify, {"value": True})[1]["value"] is True
    with pytest.raises(knobs.InvalidKnob):
        knobs.resolve(doc.verify, {"value": "1"})


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_the_learner_form_runs_the_chosen_value(
    client: TestClient, codec_question: str, session_factory: sessionmaker[Session], value: Any
) -> None:
    answered(client, codec_question, "a")  # a run is the answered learner's
    page = parse(client.get(f"/questions/{codec_question}"))
    option_values = [o["value"] for o in page.select('select[name="knob.value"] option')]
    assert knobs.encode(value) in option_values
    response = client.post(f"/questions/{codec_question}/verify", headers=htmx_headers(page),
                           data={"knob.value": knobs.encode(value)})
    assert response.status_code == 200
    assert _last_run_params(session_factory) == {"value": value}


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_the_editor_run_now_runs_the_chosen_value(
    admin_client: TestClient, codec_question: str, session_factory: sessionmaker[Session],
    value: Any,
) -> None:
    page = parse(admin_client.get(f"/author/questions/{codec_question}"))
    options = [o["value"] for o in page.select('select[name="knob.value"] option')]
    assert knobs.encode(value) in options
    data = editor_data(page, **{"knob.value": knobs.encode(value)})
    response = admin_client.post("/author/run", data=data, headers=htmx_headers(page))
    assert response.status_code == 200
    assert _last_run_params(session_factory) == {"value": value}


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_the_api_runs_the_chosen_value(
    client: TestClient, codec_question: str, session_factory: sessionmaker[Session], value: Any
) -> None:
    answered(client, codec_question, "a")  # a run is the answered learner's
    response = client.post(f"/api/v1/questions/{codec_question}/verify",
                           json={"params": {"value": value}})
    assert response.status_code == 200, response.text
    assert _last_run_params(session_factory) == {"value": value}


def test_a_knob_name_with_a_lone_surrogate_is_a_422_not_a_500(
    client: TestClient, codec_question: str
) -> None:
    body = '{"params": {"\\ud800": 1}}'
    response = client.post(f"/api/v1/questions/{codec_question}/verify", content=body,
                           headers={"content-type": "application/json"})
    assert response.status_code == 422
    # Refused before any view (app.middleware: every JSON body's text must be valid Unicode).
    assert "not valid Unicode" in response.json()["detail"]


def test_the_cli_runs_the_chosen_value(tmp_path: Path) -> None:
    snippet = tmp_path / "s.py"
    snippet.write_text('report("value", params["value"])\n')
    pairs = [f"v{i}={knobs.encode(v)}" for i, v in enumerate(VALUES)]
    out = subprocess.run(
        [str(Path(sys.executable).parent / "ddpdrill"), "verify", str(snippet), "-n", "1", "--json",
         *[arg for p in pairs for arg in ("--param", p)]],
        capture_output=True, text=True, timeout=300, check=True)
    result = json.loads(out.stdout)
    assert result["params"] == {f"v{i}": v for i, v in enumerate(VALUES)}
