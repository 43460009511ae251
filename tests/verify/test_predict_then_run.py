"""Predict, then run: never run to peek.

On a question's own page "Run it" before answering submits the answer as a prediction
(graded and stored), then starts the run beside it; in a quiz the panel offers no run
until the question is answered.
"""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from app.quizzes.models import Attempt
from app.settings import Settings
from app.verify.models import Run
from app.verify.worker import Worker
from tests.factories import count, form_fields, parse, parse_fragment, start_quiz, text
from tests.verify.test_verify_pages import HX


def test_run_it_before_answering_records_the_prediction_then_runs(
    client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    page = parse(client.get("/questions/fixture-single"))
    panel = page.select_one("#verify-panel")
    # No verify form yet: the Run button belongs to the answer form.
    assert panel.select_one("form") is None
    button = panel.select_one("button.verify-button")
    assert button["form"] == "answer-form" and button["name"] == "then_run"
    assert panel.select_one("select[name='knob.scale']")["form"] == "answer-form"

    action, hidden = form_fields(page, "form#answer-form")
    response = client.post(action, data={**hidden, "answer": "a", "knob.scale": "2",
                                         "then_run": "1"}, headers=HX)
    assert response.status_code == 200, response.text
    fragment = parse_fragment(response)
    # The prediction is graded like any answer ...
    assert fragment.select_one("section.graded.wrong") is not None
    assert count(session_factory, Attempt) == 1
    # ... and the panel swaps in with the run it asked for, with the knob it chose.
    new_panel = fragment.select_one("#verify-panel")
    assert new_panel["hx-swap-oob"] == "true"
    run = new_panel.select_one("#verify-result .run")
    assert run is not None and "prediction" in text(new_panel.select_one(".prediction-note"))
    with session_factory() as s:
        [stored] = s.query(Run).all()
        assert stored.params == {"scale": 2} and stored.id == int(run["data-run-id"])
    # Once the run is done, the evidence is checked against the key beside the prediction.
    assert Worker(session_factory, settings).run_once()
    done = parse_fragment(client.get(f"/runs/{run['data-run-id']}?slug=fixture-single",
                                     headers=HX))
    assert "Answer key: b" in text(done.select_one(".answer-key"))
    # And now the ordinary verify form is there, remembering this run for a side-by-side.
    assert new_panel.select_one("form.knobs-form input[name=prev]")["value"] == run["data-run-id"]


def test_run_it_without_a_prediction_asks_for_one_and_runs_nothing(
    client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    page = parse(client.get("/questions/fixture-single"))
    action, hidden = form_fields(page, "form#answer-form")
    response = client.post(action, data={**hidden, "then_run": "1"}, headers=HX)
    assert response.status_code == 422
    assert "Predict first" in text(parse_fragment(response).select_one(".error"))
    assert count(session_factory, Run) == 0 and count(session_factory, Attempt) == 0


def test_without_javascript_run_it_grades_and_shows_the_run_on_the_page(
    client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    page = parse(client.get("/questions/fixture-single"))
    action, hidden = form_fields(page, "form#answer-form")
    response = client.post(action, data={**hidden, "answer": "b", "knob.scale": "1",
                                         "then_run": "1"})
    assert response.status_code == 200
    full = parse(response)
    assert full.select_one("section.graded.right") is not None
    assert full.select_one("#verify-panel #verify-result .run") is not None
    assert count(session_factory, Run) == 1


def test_a_quiz_offers_the_run_only_after_the_question_is_answered(client: TestClient) -> None:
    first = start_quiz(client, topics="basics", count="5")
    base = first.rsplit("/", 1)[0]
    for position in range(1, 4):
        url = f"{base}/{position}"
        page = parse(client.get(url))
        panel = page.select_one("#verify-panel")
        if panel is None:
            continue  # a question without a snippet
        assert panel.select_one(".answer-first") is not None
        assert panel.select("button, form, select") == []
        action, hidden = form_fields(page, "form#answer-form")
        answer = page.select_one("form#answer-form input[name=answer]")["value"]
        graded = client.post(action, data={**hidden, "answer": answer}, headers=HX)
        fragment = parse_fragment(graded)
        swapped = fragment.select_one("#verify-panel")
        assert swapped.select_one("form#verify-form.knobs-form") is not None
        # Its Verify button sits right under the verdict, and submits the panel's form.
        (button,) = fragment.select("button.verify-button")
        assert button.find_parent("section", class_="graded") is not None and button["form"] == "verify-form"
        return
    raise AssertionError("the quiz had no question with a snippet")
