"""Taking a quiz in the browser's way (forms, htmx fragments, redirects), end to end."""

from __future__ import annotations

import re
import time

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.identity import LEARNER_COOKIE
from app.questions.models import Question
from app.quizzes.models import Attempt, Quiz, QuizItem
from app.settings import Settings
from tests.factories import (
    FIXTURE,
    QUIZ_URL,
    count,
    form_fields,
    htmx_headers,
    learner_id,
    parse,
    parse_fragment,
    shown_slug,
    start_quiz,
    submit_answer,
    text,
)


def _quiz_id(url: str) -> str:
    match = QUIZ_URL.match(url)
    assert match is not None
    return match["id"]


def test_the_topics_page_lists_each_topic_once_with_its_count_and_a_box_to_tick(
    client: TestClient,
) -> None:
    page = parse(client.get("/topics"))
    rows = page.select("ul.topic-picks li")
    table = {r.select_one("a").get_text(strip=True):
             (r.select_one("a")["href"], r.select_one(".hint").get_text(strip=True),
              r.select_one("input[name=topics]")["value"]) for r in rows}
    assert table == {"Basics": ("/topics/basics", "3", "basics"),
                     "Traces": ("/topics/traces", "2", "traces")}
    # Each topic appears once on the page.
    assert len(page.select("a[href='/topics/basics']")) == 1
    form = page.select_one("form.quiz-form")
    assert form is not None and form["method"] == "post" and form["action"] == "/quizzes"
    assert [i["value"] for i in form.select("input[name=topics]")] == ["basics", "traces"]
    assert [o["value"] for o in form.select("select[name=difficulty] option")] == ["any", "1", "2", "3"]
    assert form.select("select[name=count] option")


def test_home_and_topics_with_an_empty_bank_say_how_to_load_it(app_client: TestClient) -> None:
    for path in ("/", "/topics"):
        page = parse(app_client.get(path))
        assert page.select_one("form.quiz-form") is None
        assert "ddpdrill bank import" in page.select_one("main").get_text(), path


def test_topic_page_lists_its_questions_and_offers_a_quiz(client: TestClient) -> None:
    page = parse(client.get("/topics/traces"))
    assert page.h1.get_text(strip=True) == "Traces"
    assert [a["href"] for a in page.select("ul.question-list a")] == [
        "/questions/fixture-trace-join", "/questions/fixture-trace-buckets"]
    action, data = form_fields(page, "form.inline")
    response = client.post(action, data=data, follow_redirects=False)
    assert response.status_code == 303
    assert QUIZ_URL.match(response.headers["location"])


def test_starting_a_quiz_redirects_to_its_first_question(
    client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    first = start_quiz(client, count="3")
    assert first.endswith("/1")
    page = parse(client.get(first))
    assert page.select_one(".quiz-progress").get_text(" ", strip=True).startswith("Question 1 of 3")
    assert shown_slug(page) in FIXTURE
    with session_factory() as session:
        quiz = session.get(Quiz, _quiz_id(first))
        assert quiz is not None
        assert quiz.learner_id == learner_id(client, settings)
    assert count(session_factory, QuizItem) == 3


def test_quiz_filters_pick_only_matching_questions(client: TestClient) -> None:
    first = start_quiz(client, topics=["basics", "traces"], difficulty="2", count="10")
    summary = parse(client.get(first.rsplit("/", 1)[0] + "/summary"))
    links = sorted(a["href"] for a in summary.select("ol.summary-questions a[href^='/questions/']"))
    assert links == ["/questions/fixture-multi", "/questions/fixture-trace-join"]


def test_answering_with_htmx_returns_only_the_graded_fragment(client: TestClient) -> None:
    first = start_quiz(client, count="1")
    slug = shown_slug(parse(client.get(first)))

    response = submit_answer(client, first, FIXTURE[slug]["right"], htmx=True)

    assert response.status_code == 200
    assert "<html" not in response.text.lower() and "<body" not in response.text.lower()
    fragment = parse_fragment(response)
    roots = [el for el in fragment.contents if getattr(el, "name", None)]
    assert (roots[0].name, roots[0].get("id")) == ("div", "answer-area")
    assert all(r.has_attr("hx-swap-oob") for r in roots[1:])  # anything else swaps out of band
    assert fragment.select_one("#verdict").get_text(strip=True) == "Right"
    assert "SENTINEL-EXPLANATION" in fragment.select_one(".explanation").get_text()
    assert fragment.select_one("a.button")["href"].endswith("/summary")
    assert fragment.select_one("#answer-area form.answer-form") is None


def test_answering_without_js_redirects_back_to_the_graded_page(client: TestClient) -> None:
    first = start_quiz(client, count="1")
    slug = shown_slug(parse(client.get(first)))

    response = submit_answer(client, first, FIXTURE[slug]["wrong"], htmx=False)

    assert response.status_code == 303
    assert response.headers["location"] == first
    page = parse(client.get(first))
    assert page.html is not None
    assert page.select_one("form.answer-form") is None
    graded = page.select_one("#answer-area section.graded")
    assert graded is not None and "wrong" in graded["class"]
    assert page.select_one("#verdict").get_text(strip=True) == "Not quite"


def test_whole_quiz_ends_in_a_summary_with_score_topics_time_and_links(
    client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    url = start_quiz(client, count="5")
    quiz_id = _quiz_id(url)
    # Right on the traces, wrong on the numeric, half right on the multi, right on the single.
    picks = {"fixture-single": "b", "fixture-multi": ["a"],
             "fixture-numeric": "1000", "fixture-trace-join": "a", "fixture-trace-buckets": "4.005"}
    seen = []
    for position in range(1, 6):
        page_url = f"/quizzes/{quiz_id}/{position}"
        slug = shown_slug(parse(client.get(page_url)))
        seen.append(slug)
        graded = parse_fragment(submit_answer(client, page_url, picks[slug], htmx=True))
        next_link = graded.select_one("a.button")["href"]
        assert next_link == (f"/quizzes/{quiz_id}/{position + 1}" if position < 5
                             else f"/quizzes/{quiz_id}/summary")
    assert sorted(seen) == sorted(FIXTURE)

    summary = parse(client.get(f"/quizzes/{quiz_id}/summary"))

    score_line = text(summary.select_one(".score-line"))
    # Whole questions, those partly right apart, and the share of the marks (3.5 of 5).
    assert re.match(r"^3 of 5 questions right and 1 partly right · 70% of the marks · time taken \d+\.\d s$",
                    score_line), score_line
    by_topic = {
        cells[0].get_text(strip=True): (cells[1].get_text(strip=True), cells[2].get_text(strip=True))
        for cells in (r.select("td") for r in summary.select("table.summary-topics tbody tr"))
    }
    assert by_topic == {"Basics": ("50%", "3"), "Traces": ("100%", "2")}  # topic titles
    items = summary.select("ol.summary-questions li")
    assert [li.select_one("a")["href"] for li in items] == [f"/questions/{s}" for s in seen]
    badges = {li.select_one("a")["href"]: li.select_one(".badge").get_text(strip=True) for li in items}
    assert badges["/questions/fixture-multi"] == "50%"
    assert badges["/questions/fixture-numeric"] == "0%"
    with session_factory() as session:
        quiz = session.get(Quiz, quiz_id)
        assert quiz is not None and quiz.finished_at is not None


def test_every_quiz_attempt_stores_question_revision_answer_score_and_time(
    client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    url = start_quiz(client, topics="basics", difficulty="2", count="1")  # fixture-multi
    submit_answer(client, url, ["a", "c"], htmx=True)

    with session_factory() as session:
        attempt = session.scalars(select(Attempt)).one()
        question = session.scalars(select(Question).where(Question.slug == "fixture-multi")).one()
        item = session.get(QuizItem, attempt.quiz_item_id)
        assert item is not None
        quiz = session.get(Quiz, item.quiz_id)
        assert quiz is not None
        assert attempt.learner_id == quiz.learner_id
        assert (attempt.question_id, attempt.revision_id) == (question.id, question.current_revision_id)
        assert (attempt.answer, attempt.score, attempt.correct) == (["a", "c"], 0.0, False)
        assert attempt.time_taken_ms is not None and attempt.time_taken_ms >= 0


def test_a_standalone_attempt_also_stores_its_time_taken(
    client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    before = time.time()
    submit_answer(client, "/questions/fixture-numeric", "1401", htmx=True)  # shows the form, answers
    took_ms = (time.time() - before) * 1000
    with session_factory() as session:
        attempt = session.scalars(select(Attempt)).one()
        assert (attempt.answer, attempt.correct, attempt.quiz_item_id) == (1401.0, True, None)
        # From the form's render to the answer: within the time this test spent on both.
        assert attempt.time_taken_ms is not None and 0 <= attempt.time_taken_ms <= took_ms + 1


def test_opening_a_quiz_resumes_at_the_first_unanswered_question(client: TestClient) -> None:
    url = start_quiz(client, count="2")
    quiz = url.rsplit("/", 1)[0]
    assert client.get(quiz, follow_redirects=False).headers["location"] == f"{quiz}/1"
    slug = shown_slug(parse(client.get(url)))
    submit_answer(client, url, FIXTURE[slug]["right"], htmx=True)
    assert client.get(quiz, follow_redirects=False).headers["location"] == f"{quiz}/2"
    slug = shown_slug(parse(client.get(f"{quiz}/2")))
    submit_answer(client, f"{quiz}/2", FIXTURE[slug]["right"], htmx=True)
    assert client.get(quiz, follow_redirects=False).headers["location"] == f"{quiz}/summary"


def test_each_question_has_its_own_page_where_it_can_be_answered(client: TestClient) -> None:
    page = parse(client.get("/questions/fixture-single"))
    assert page.select_one("#q-title").get_text(strip=True) == "Fixture single choice"
    form = page.select_one("form.answer-form")
    assert form["action"] == form["hx-post"] == "/questions/fixture-single/answer"
    assert form["hx-target"] == "#answer-area"

    fragment = parse_fragment(submit_answer(client, "/questions/fixture-single", "b", htmx=True))
    assert fragment.select_one("#verdict").get_text(strip=True) == "Right"

    full = submit_answer(client, "/questions/fixture-single", "a", htmx=False)
    assert full.status_code == 200
    page = parse(full)
    assert page.select_one("#q-title") is not None
    assert page.select_one("#verdict").get_text(strip=True) == "Not quite"
    picked = page.select_one("ul.choices-graded li.picked")
    assert "incorrect" in picked["class"]
    assert "correct" in page.select("ul.choices-graded li")[1]["class"]


def test_question_pages_explain_the_answer_format(client: TestClient) -> None:
    multi = parse(client.get("/questions/fixture-multi"))
    assert "Partial credit" in multi.select_one("form.answer-form .hint").get_text()
    assert [i["type"] for i in multi.select("input[name=answer]")] == ["checkbox"] * 4

    numeric = parse(client.get("/questions/fixture-numeric"))
    assert numeric.select_one("label[for=answer-input]").get_text(strip=True) == "Your answer (in MB)"
    assert numeric.select_one(".unit").get_text(strip=True) == "MB"
    hint = numeric.select_one("form.answer-form p.hint").get_text(strip=True)
    assert hint.startswith("Accepted within ±5%;")

    buckets = parse(client.get("/questions/fixture-trace-buckets"))
    assert "±0.01 ms" in buckets.select_one("form.answer-form p.hint").get_text()


def test_trace_questions_render_their_trace_as_a_table(client: TestClient) -> None:
    join = parse(client.get("/questions/fixture-trace-join"))
    table = join.select_one("figure.trace table.trace-table")
    assert [th.get_text(strip=True) for th in table.select("thead th")] == [
        "Step", "Rank 0", "Rank 1", "Outcome"]
    rows = [[c.get_text(strip=True) for c in tr.select("th, td")] for tr in table.select("tbody tr")]
    assert rows[1] == ["3", "waits in all-reduce", "loop exited", "TRACE-NOTE-VISIBLE"]

    buckets = parse(client.get("/questions/fixture-trace-buckets"))
    table = buckets.select_one("figure.trace table.trace-table.buckets")
    rows = [[c.get_text(strip=True) for c in tr.select("th, td")] for tr in table.select("tbody tr")]
    assert rows == [["A", "3 ms", "6 ms", "6–11 ms"], ["B", "5 ms", "17 ms", "17–22 ms"]]


def test_another_learner_cannot_open_or_answer_someone_elses_quiz(
    client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    url = start_quiz(client, count="2")
    quiz = url.rsplit("/", 1)[0]
    stranger = TestClient(client.app)
    home = parse(stranger.get("/topics"))
    assert stranger.cookies.get(LEARNER_COOKIE) != client.cookies.get(LEARNER_COOKIE)

    for path in (quiz, url, f"{quiz}/summary"):
        response = stranger.get(path, follow_redirects=False)
        assert response.status_code == 404, path
        assert parse(response).h1.get_text(strip=True) == "Not found"
    _action, data = form_fields(home, "form.quiz-form")
    posted = stranger.post(f"{url}/answer", data={**data, "answer": "a"}, headers=htmx_headers(home))
    assert posted.status_code == 404
    assert count(session_factory, Attempt) == 0


def test_the_quiz_end_retries_the_misses_offers_review_and_sign_up(client: TestClient) -> None:
    url = start_quiz(client, topics="basics", count="3")
    quiz = url.rsplit("/", 1)[0]
    for position in (1, 2, 3):
        page = parse(client.get(f"{quiz}/{position}"))
        slug = shown_slug(page)
        which = "right" if position == 1 else "wrong"
        submit_answer(client, f"{quiz}/{position}", FIXTURE[slug][which], htmx=False)
    end = parse(client.get(f"{quiz}/summary"))
    assert text(end.select_one(".retry-misses")) == "Retry the 2 misses"
    assert end.select_one("a.review-due[href='/review']") is not None
    assert end.select_one(".keep-history a[href='/signup']") is not None
    action, hidden = form_fields(end, "form[action$='/retry']")
    retry = client.post(action, data=hidden, follow_redirects=False)
    assert retry.status_code == 303 and QUIZ_URL.match(retry.headers["location"])
    again = retry.headers["location"].rsplit("/", 1)[0]
    asked = {shown_slug(parse(client.get(f"{again}/{p}"))) for p in (1, 2)}
    first = shown_slug(parse(client.get(f"{quiz}/1")))
    assert len(asked) == 2 and first not in asked
    assert client.get(f"{again}/3").status_code == 404
