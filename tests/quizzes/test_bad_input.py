"""Bad input gets a clear 4xx and stores nothing; within a quiz the first answer counts."""

from __future__ import annotations

import threading
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.quizzes import service
from app.quizzes.models import Attempt, Quiz, QuizItem
from tests.factories import (
    FIXTURE,
    count,
    form_fields,
    htmx_headers,
    parse,
    parse_fragment,
    start_quiz,
    submit_answer,
    text,
)

# (question, what the form sends, words of the message)
INVALID = [
    ("fixture-single", "z", "not one of the choices"),
    ("fixture-multi", ["a", "q"], "not among the choices"),
    ("fixture-numeric", "lots", "is not a number"),
    ("fixture-single", None, "pick one of the choices"),  # empty forms
    ("fixture-multi", None, "pick at least one"),
    ("fixture-numeric", None, "enter a number"),
    ("fixture-trace-buckets", "   ", "enter a number"),
]


def _quiz_for(client: TestClient, slug: str) -> str:
    """A one-question quiz holding exactly this fixture question."""
    filters = {"fixture-single": ("basics", "1"), "fixture-multi": ("basics", "2"),
               "fixture-numeric": ("basics", "3"), "fixture-trace-join": ("traces", "2"),
               "fixture-trace-buckets": ("traces", "3")}[slug]
    return start_quiz(client, topics=filters[0], difficulty=filters[1], count="1")


def _post(client: TestClient, page_url: str, answer: Any, *, htmx: bool) -> Any:
    page = parse(client.get(page_url))
    action, data = form_fields(page, "form.answer-form")
    payload = {**data, **({"answer": answer} if answer is not None else {})}
    return client.post(action, data=payload, headers=htmx_headers(page) if htmx else {},
                       follow_redirects=False)


def test_invalid_quiz_answer_is_422_with_a_message_and_stores_nothing(
    client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    for slug, answer, words in INVALID:
        case = (slug, answer)
        url = _quiz_for(client, slug)
        response = _post(client, url, answer, htmx=True)

        assert response.status_code == 422, case
        fragment = parse_fragment(response)
        assert words in text(fragment.select_one("#answer-area form.answer-form p.error[role=alert]")), case
        assert fragment.select_one("section.graded") is None, case
        assert count(session_factory, Attempt) == 0, case
    # The item is still open: a valid answer after an invalid one is graded.
    assert _post(client, url, FIXTURE[slug]["right"], htmx=True).status_code == 200
    assert count(session_factory, Attempt) == 1


def test_invalid_quiz_answer_without_js_is_a_422_page_with_the_form_and_message(
    client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    url = _quiz_for(client, "fixture-multi")
    response = _post(client, url, None, htmx=False)
    assert response.status_code == 422
    page = parse(response)
    assert page.select_one(".quiz-progress") is not None
    assert "pick at least one" in text(page.select_one("form.answer-form p.error"))
    assert count(session_factory, Attempt) == 0


def test_invalid_standalone_answer_is_422_and_keeps_the_form(
    client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    for slug, answer, words in INVALID:
        response = _post(client, f"/questions/{slug}", answer, htmx=True)
        assert response.status_code == 422, (slug, answer)
        form = parse_fragment(response).select_one("form.answer-form")
        assert words in text(form.select_one("p.error")), (slug, answer)
        assert form.select_one("input[name=token]")["value"]
    assert count(session_factory, Attempt) == 0


def test_a_second_answer_in_a_quiz_is_refused_and_the_first_counts(
    client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    url = _quiz_for(client, "fixture-single")
    page = parse(client.get(url))
    action, data = form_fields(page, "form.answer-form")
    first = client.post(action, data={**data, "answer": "a"}, headers=htmx_headers(page))
    # The same form again (a double click, a replay, or the back button and another pick).
    again = client.post(action, data={**data, "answer": "b"}, headers=htmx_headers(page))
    no_js = client.post(action, data={**data, "answer": "b"}, follow_redirects=False)

    assert first.status_code == 200
    assert again.status_code == no_js.status_code == 409
    for response in (again, no_js):
        tree = parse(response)
        assert "first answer counts" in text(tree.select_one(".notice"))
        assert text(tree.select_one("#verdict")) == "Not quite"
    with session_factory() as session:
        attempts = session.scalars(select(Attempt)).all()
        assert [(a.answer, a.correct) for a in attempts] == [("a", False)]


def test_a_replayed_standalone_form_is_refused_and_stores_one_attempt(
    client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    page = parse(client.get("/questions/fixture-numeric"))
    action, data = form_fields(page, "form.answer-form")
    assert data["token"]
    first = client.post(action, data={**data, "answer": "1000"}, headers=htmx_headers(page))
    replay = client.post(action, data={**data, "answer": "1400"}, headers=htmx_headers(page))

    assert first.status_code == 200
    assert replay.status_code == 409
    assert "first submission counts" in text(parse_fragment(replay).select_one(".notice"))
    assert count(session_factory, Attempt) == 1
    # A freshly opened page is a new attempt.
    assert submit_answer(client, "/questions/fixture-numeric", "1400", htmx=True).status_code == 200
    assert count(session_factory, Attempt) == 2


def test_concurrent_double_submit_to_one_quiz_item_stores_one_attempt(
    client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    url = _quiz_for(client, "fixture-single")
    with session_factory() as session:
        item = session.scalars(select(QuizItem)).one()
        learner = session.scalars(select(Quiz)).one().learner_id
    outcome: list[str] = []

    def second_submit() -> None:
        with session_factory() as other:
            other_item = other.get(QuizItem, item.id)
            assert other_item is not None
            try:
                service.answer_item(db_session=other, learner_id=learner, item=other_item, raw_answer="b")
                other.commit()
                outcome.append("stored")
            except service.AlreadyAnswered as exc:
                outcome.append(f"already answered: {exc.attempt.answer}")

    # The first submit holds its transaction open while the second one runs.
    with session_factory() as first:
        first_item = first.get(QuizItem, item.id)
        assert first_item is not None
        service.answer_item(db_session=first, learner_id=learner, item=first_item, raw_answer="a")
        racer = threading.Thread(target=second_submit)
        racer.start()
        racer.join(timeout=0.1)
        first.commit()
    racer.join(timeout=20)

    assert outcome == ["already answered: a"]
    assert count(session_factory, Attempt) == 1
    assert url


def test_bad_quiz_settings_are_422_and_start_nothing(
    client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    home = parse(client.get("/topics"))
    action, data = form_fields(home, "form.quiz-form")
    for form, words in [({"topics": "nope"}, "Unknown topic: nope"),
                        ({"count": "0"}, "count must be between 1 and 30"),
                        ({"count": "31"}, "count must be between 1 and 30"),
                        ({"count": "many"}, "count must be a whole number"),
                        ({"difficulty": "4"}, "difficulty must be between 1 and 3")]:
        response = client.post(action, data={**data, **form}, follow_redirects=False)
        assert response.status_code == 422, form
        assert words in text(parse(response).select_one("p.error")), form
    assert count(session_factory, Quiz) == 0
    # Fields the form does not have are ignored.
    extra = client.post(action, data={**data, "count": "1", "extra": "x"}, follow_redirects=False)
    assert extra.status_code == 303


def test_a_quiz_with_no_matching_question_is_422(
    client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    action, data = form_fields(parse(client.get("/topics")), "form.quiz-form")
    response = client.post(action, data={**data, "topics": "traces", "difficulty": "1"})
    assert response.status_code == 422
    assert "No published question" in text(parse(response).select_one("p.error"))
    assert count(session_factory, Quiz) == 0


def test_unknown_quizzes_and_positions_are_404_pages(client: TestClient) -> None:
    url = start_quiz(client, count="1")
    quiz = url.rsplit("/", 1)[0]
    for path in ["/quizzes/00000000-0000-0000-0000-000000000000", "/quizzes/not-a-quiz/1",
                 "/quizzes/not-a-quiz/summary", f"{quiz}/0", f"{quiz}/2", f"{quiz}/99"]:
        response = client.get(path)
        assert response.status_code == 404, path
        assert text(parse(response).h1) == "Not found", path
    assert "has no question" in text(parse(client.get(f"{quiz}/2")).select_one("p.error"))


def test_learner_forms_without_their_csrf_token_are_refused_and_change_nothing(
    client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    url = start_quiz(client, count="1")
    stranger = TestClient(client.app)
    _action, theirs = form_fields(parse(stranger.get("/topics")), "form.quiz-form")
    posts = [("/quizzes", {"count": "1"}),
             (f"{url}/answer", {"answer": "a"}),
             ("/questions/fixture-single/answer", {"answer": "b"})]
    for path, data in posts:
        for token in ({}, {"csrf_token": "forged"}, {"csrf_token": theirs["csrf_token"]}):
            response = client.post(path, data={**data, **token}, follow_redirects=False)
            assert response.status_code == 403, (path, token)
    assert count(session_factory, Quiz) == 1
    assert count(session_factory, Attempt) == 0
