"""Mock interviews: the question mix, no feedback until the end, the server-held deadline,
the report (score, time per question, calibration, misses), the review queue, the share link."""

from __future__ import annotations

import random
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.clock import FixedClock
from app.main import create_app
from app.mock import service as mock_service
from app.mock.models import MockInterview
from app.questions.models import Question
from app.quizzes.models import Attempt, QuizItem
from app.review import service as review
from app.review.models import ReviewCard
from app.settings import Settings
from tests.factories import FIXTURE, T0, count, form_fields, learner_id, parse, text


def start_mock(client: TestClient, minutes: int = 25) -> str:
    """Submit the "Start a mock interview" form; returns the interview's URL."""
    page = parse(client.get("/mock"))
    action, hidden = form_fields(page, "form.mock-start-form")
    r = client.post(action, data={**hidden, "minutes": str(minutes)}, follow_redirects=False)
    assert r.status_code == 303, r.text
    return str(r.headers["location"])


def answer_current(client: TestClient, url: str, which: str = "right",
                   confidence: str | None = None) -> tuple[str, Any]:
    """Open the interview's current question and answer it right or wrong; returns the slug
    and the response."""
    page = parse(client.get(url))
    article = page.select_one("article.question[data-slug]")
    assert article is not None, text(page.select_one("main"))
    slug = str(article["data-slug"])
    action, hidden = form_fields(page, "form.answer-form")
    data: dict[str, Any] = {**hidden, "answer": FIXTURE[slug][which]}
    if confidence:
        data["confidence"] = confidence
    return slug, client.post(action, data=data, follow_redirects=False)


def _mock_id(url: str) -> str:
    return url.rstrip("/").split("/")[2]


def test_a_mock_interview_covers_every_topic_with_a_trace_and_a_predict_then_run_question(
    client: TestClient, clock: FixedClock, session_factory: sessionmaker[Session],
) -> None:
    url = start_mock(client)
    with session_factory() as s:
        mock = s.get(MockInterview, _mock_id(url))
        assert mock is not None and mock.minutes == 25
        assert mock.deadline - mock.started_at == timedelta(minutes=25)
        qs = list(s.scalars(select(Question).join(QuizItem, QuizItem.question_id == Question.id)
                            .where(QuizItem.quiz_id == mock.quiz_id)))
    # The fixture bank has five questions; all are asked, so every topic and difficulty is.
    assert len(qs) == 5
    assert {q.topic for q in qs} == {"basics", "traces"}
    assert any(q.type == "trace" for q in qs)
    assert any(q.has_snippet for q in qs)
    assert {q.difficulty for q in qs} == {1, 2, 3}


def test_the_pick_leans_on_the_weakest_topic_and_mixes_difficulty() -> None:
    def q(i: int, topic: str, difficulty: int, qtype: str = "single",
          snippet: bool = False) -> Question:
        return Question(id=i, slug=f"q{i}", topic=topic, title=f"q{i}", difficulty=difficulty,
                        type=qtype, has_snippet=snippet, status="published")

    pool = [q(i, "weak", 1 + i % 3) for i in range(20)]
    pool += [q(100 + i, "strong", 1 + i % 3) for i in range(20)]
    pool += [q(200, "strong", 2, "trace"), q(201, "other", 3, "single", snippet=True)]
    weakness = {"weak": 1.0, "strong": 0.05, "other": 0.5}
    totals = {"weak": 0, "strong": 0, "other": 0}
    for seed in range(20):
        picked = mock_service._pick(list(pool), weakness, 10, random.Random(seed))
        topics = [p.topic for p in picked]
        assert len(picked) == 10 and len({p.id for p in picked}) == 10
        assert any(p.type == "trace" for p in picked) and any(p.has_snippet for p in picked)
        assert set(topics) == {"weak", "strong", "other"}
        assert {p.difficulty for p in picked} == {1, 2, 3}
        for t in topics:
            totals[t] += 1
    # Past the guaranteed picks, the draws follow 0.15 + weakness: weak 1.15, strong 0.2.
    assert totals["weak"] > 2 * totals["strong"], totals


def test_answers_get_no_feedback_until_the_interview_ends(
    client: TestClient, clock: FixedClock, session_factory: sessionmaker[Session],
    settings: Settings,
) -> None:
    url = start_mock(client)
    _slug, r = answer_current(client, url, "wrong", "sure")
    assert r.status_code == 303 and r.headers["location"] == url
    page = parse(client.get(url))
    assert page.select_one("section.graded") is None
    assert "Not quite" not in text(page.select_one("main"))
    # No card yet: the header's due count must not give the miss away.
    clock.advance(timedelta(minutes=5))
    assert count(session_factory, ReviewCard, ReviewCard.learner_id == learner_id(client, settings)) == 0
    assert client.get(f"{url}/report", follow_redirects=False).headers["location"] == url
    api = client.get(f"/api/v1/mock-interviews/{_mock_id(url)}/report")
    assert api.status_code == 409


def test_an_answer_after_the_deadline_is_refused_and_not_stored(
    client: TestClient, clock: FixedClock, session_factory: sessionmaker[Session],
) -> None:
    url = start_mock(client, minutes=10)
    answer_current(client, url, "right")
    # The learner loads the next question in time, then sends it after the deadline.
    page = parse(client.get(url))
    action, hidden = form_fields(page, "form.answer-form")
    slug = str(page.select_one("article.question[data-slug]")["data-slug"])  # type: ignore[index]
    clock.advance(timedelta(minutes=10, seconds=1))
    before = count(session_factory, Attempt)
    r = client.post(action, data={**hidden, "answer": FIXTURE[slug]["right"]},
                    follow_redirects=False)
    assert r.status_code == 409
    assert "not counted" in text(parse(r).select_one("main"))
    assert count(session_factory, Attempt) == before == 1
    # The interview is over: the report counts one answer, the late one as not answered.
    report = parse(client.get(f"{url}/report"))
    assert text(report.select_one(".mock-score")) == "1 of 5"
    rows = report.select("table.mock-questions tbody tr")
    assert sum("not answered" in text(r) for r in rows) == 4
    # The API refuses a late answer the same way, whatever the page said.
    api = client.post(f"/api/v1/mock-interviews/{_mock_id(url)}/answers",
                      json={"position": 3, "answer": "a"})
    assert api.status_code == 409
    assert count(session_factory, Attempt) == 1


def test_an_api_answer_one_second_past_the_deadline_does_not_count(
    client: TestClient, clock: FixedClock, session_factory: sessionmaker[Session],
) -> None:
    r = client.post("/api/v1/mock-interviews", json={"minutes": 10})
    assert r.status_code == 201
    body = r.json()
    items = body["items"]
    ok = client.post(f"/api/v1/mock-interviews/{body['id']}/answers",
                     json={"position": 1, "answer": FIXTURE[items[0]["slug"]]["right"]})
    assert ok.status_code == 201 and ok.json()["seconds_left"] == 600
    clock.advance(timedelta(minutes=10))
    late = client.post(f"/api/v1/mock-interviews/{body['id']}/answers",
                       json={"position": 2, "answer": FIXTURE[items[1]["slug"]]["right"]})
    assert late.status_code == 409
    report = client.get(f"/api/v1/mock-interviews/{body['id']}/report").json()
    assert report["answered"] == 1 and report["score"] == 1.0
    assert [i["answered"] for i in report["items"]] == [True, False, False, False, False]


def test_the_report_gives_score_time_per_question_and_calibration(
    client: TestClient, clock: FixedClock,
) -> None:
    url = start_mock(client)
    # sure+right, sure+wrong, guessing+wrong, guessing+right, unsure+right; 30 s, 60 s, ...
    plan = [("right", "sure"), ("wrong", "sure"), ("wrong", "guessing"), ("right", "guessing"),
            ("right", "unsure")]
    for k, (which, conf) in enumerate(plan, start=1):
        page_url = url
        client.get(page_url)
        clock.advance(timedelta(seconds=30 * k))
        _slug, r = answer_current(client, url, which, conf)
        assert r.status_code == 303
    r = client.get(url, follow_redirects=False)
    assert r.headers["location"] == f"{url}/report"
    page = parse(client.get(f"{url}/report"))
    assert text(page.select_one(".mock-score")) == "3 of 5"
    assert text(page.select_one(".sure-right")) == "50%"
    assert text(page.select_one(".guessing-wrong")) == "50%"
    times = [text(td) for td in page.select("td.question-time")]
    assert times == ["30 s", "1 min 0 s", "1 min 30 s", "2 min 0 s", "2 min 30 s"] or \
        len(set(times)) == 5, times
    cal = {tr["data-level"]: [text(td) for td in tr.select("td.num")]
           for tr in page.select("table.calibration tbody tr")}
    assert cal == {"guessing": ["2", "1"], "unsure": ["1", "1"], "sure": ["2", "1"]}
    # The sentence is read from these answers: "sure" right half the time is overconfidence.
    verdict = page.select_one(".calibration-verdict")
    assert verdict["data-kind"] == "over"
    assert text(verdict).startswith('Overconfident: "sure" was right 50% of the time (1 of 2).')
    # The report leads with the score, calibration and misses; per-topic detail is folded.
    headings = [h["id"] for h in page.select("article.mock-report h2")]
    assert headings[:4] == ["calibration-h", "misses-h", "topics-h", "questions-h"]
    assert page.select_one("details.report-topics #mock-topics") is not None
    misses = page.select("article.miss")
    assert len(misses) == 2
    for m in misses:
        assert m.select_one(".explanation") is not None and m.select_one(".miss-key") is not None
    api = client.get(f"/api/v1/mock-interviews/{_mock_id(url)}/report").json()
    assert api["calibration"]["sure_right"] == 0.5
    assert api["calibration"]["guessing_wrong"] == 0.5
    assert [i["time_taken_ms"] for i in api["items"]] == [30_000, 60_000, 90_000, 120_000, 150_000]


def test_a_missed_question_with_a_snippet_links_to_its_verify_evidence(
    client: TestClient, clock: FixedClock,
) -> None:
    url = start_mock(client)
    for _ in range(5):
        answer_current(client, url, "wrong")
    page = parse(client.get(f"{url}/report"))
    links = [a["href"] for a in page.select("article.miss .verify-evidence a")]
    assert "/questions/fixture-single#verify-panel" in links


def test_misses_join_the_review_queue_when_the_interview_ends(
    client: TestClient, clock: FixedClock, session_factory: sessionmaker[Session],
    settings: Settings,
) -> None:
    url = start_mock(client)
    missed = []
    for k in range(5):
        slug, _ = answer_current(client, url, "wrong" if k < 2 else "right", "sure")
        if k < 2:
            missed.append(slug)
    finished = parse(client.get(f"{url}/report"))
    assert finished.select_one(".mock-score") is not None
    learner = learner_id(client, settings)
    with session_factory() as s:
        # Misses are rated Again: due within minutes; the right ones ("sure", fast) much later.
        due = review.due_cards(db_session=s, learner_id=learner,
                               now=clock.now() + timedelta(minutes=15))
        assert sorted(d.question.slug for d in due) == sorted(missed)


def test_the_share_link_shows_the_report_to_anyone_until_it_is_revoked(
    client: TestClient, clock: FixedClock, browser_client: TestClient,
) -> None:
    url = start_mock(client)
    answer_current(client, url, "wrong")
    finish = parse(client.get(url))
    action, hidden = form_fields(finish, "form.finish-form")
    assert client.post(action, data=hidden, follow_redirects=False).status_code == 303
    report = parse(client.get(f"{url}/report"))
    action, hidden = form_fields(report, "section.share form")
    client.post(action, data=hidden)
    report = parse(client.get(f"{url}/report"))
    link = str(report.select_one("a.share-link")["href"])  # type: ignore[index]
    token = link.rsplit("/", 1)[1]
    assert len(token) >= 32
    # Another learner: not the owner's URL, not the API, only the live link.
    assert browser_client.get(f"{url}/report").status_code == 404
    assert browser_client.get(f"/api/v1/mock-interviews/{_mock_id(url)}/report").status_code == 404
    shared = browser_client.get(link)
    assert shared.status_code == 200
    page = parse(shared)
    assert page.select_one(".mock-score") is not None
    assert page.select_one("section.share") is None
    assert shared.headers["cache-control"] == "private, no-store"
    # Revoked: the old link is a 404; a guess is too.
    action, hidden = form_fields(report, "section.share form")
    assert hidden["action"] == "revoke"
    client.post(action, data=hidden)
    assert browser_client.get(link).status_code == 404
    assert browser_client.get("/shared/mock/" + "A" * 32).status_code == 404


def test_another_learner_cannot_see_or_answer_someone_elses_interview(
    client: TestClient, clock: FixedClock, browser_client: TestClient,
) -> None:
    url = start_mock(client)
    mid = _mock_id(url)
    assert browser_client.get(url).status_code == 404
    assert browser_client.get(f"/api/v1/mock-interviews/{mid}").status_code == 404
    r = browser_client.post(f"/api/v1/mock-interviews/{mid}/answers",
                            json={"position": 1, "answer": "a"})
    assert r.status_code == 404


def test_bad_lengths_and_answers_are_422_not_500(client: TestClient, clock: FixedClock) -> None:
    page = parse(client.get("/mock"))
    action, hidden = form_fields(page, "form.mock-start-form")
    for minutes in ("9", "46", "x", "1e9"):
        r = client.post(action, data={**hidden, "minutes": minutes}, follow_redirects=False)
        assert r.status_code == 422, minutes
    assert client.post("/api/v1/mock-interviews", json={"minutes": 60}).status_code == 422
    url = start_mock(client)
    page = parse(client.get(url))
    action, hidden = form_fields(page, "form.answer-form")
    slug = str(page.select_one("article.question[data-slug]")["data-slug"])  # type: ignore[index]
    bad = "not-a-number" if slug == "fixture-numeric" else "zz"
    r = client.post(action, data={**hidden, "answer": bad}, follow_redirects=False)
    assert r.status_code == 422
    assert client.post(f"/mock/{_mock_id(url)}/99/answer", data=hidden).status_code == 404


def test_deleting_an_account_removes_its_mock_interviews_and_interview_date_only(
    client: TestClient, clock: FixedClock, browser_client: TestClient, settings: Settings,
    session_factory: sessionmaker[Session],
) -> None:
    from app.progress.models import LearnerGoal
    from tests.factories import sign_up

    for c in (client, browser_client):
        url = start_mock(c)
        answer_current(c, url, "wrong", "sure")
        c.post(f"/api/v1/mock-interviews/{_mock_id(url)}/finish")
        page = parse(c.get("/dashboard"))
        action, hidden = form_fields(page, "form.goal-form")
        c.post(action, data={**hidden, "interview_date": "2026-03-20", "target": "90"})
    mine, theirs = learner_id(client, settings), learner_id(browser_client, settings)
    sign_up(client, "lena")
    exported = client.get("/account/export.json").json()
    assert len(exported["mock_interviews"]) == 1
    assert exported["interview_goal"] == {"interview_date": "2026-03-20", "target": 0.9}
    page = parse(client.get("/account"))
    action, hidden = form_fields(page, "form.delete-account")
    assert client.post(action, data={**hidden, "confirm": "lena"}).status_code == 200
    for learner, left in ((mine, 0), (theirs, 1)):
        assert count(session_factory, MockInterview, MockInterview.learner_id == learner) == left
        assert count(session_factory, LearnerGoal, LearnerGoal.learner_id == learner) == left


def test_the_quiz_routes_cannot_answer_a_mock_interview_around_its_deadline(
    client: TestClient, clock: FixedClock, session_factory: sessionmaker[Session],
) -> None:
    url = start_mock(client, minutes=10)
    page = parse(client.get(url))
    _action, hidden = form_fields(page, "form.answer-form")
    clock.advance(timedelta(minutes=30))
    mid = _mock_id(url)
    assert client.get(f"/quizzes/{mid}/1").status_code == 404
    r = client.post(f"/quizzes/{mid}/1/answer", data={**hidden, "answer": "a"})
    assert r.status_code == 404
    assert count(session_factory, Attempt) == 0


def test_a_second_answer_to_a_mock_question_is_refused_and_the_first_counts(
    client: TestClient, clock: FixedClock, session_factory: sessionmaker[Session],
) -> None:
    body = client.post("/api/v1/mock-interviews", json={"minutes": 10}).json()
    slug = body["items"][0]["slug"]
    answers = f"/api/v1/mock-interviews/{body['id']}/answers"
    first = client.post(answers, json={"position": 1, "answer": FIXTURE[slug]["wrong"]})
    again = client.post(answers, json={"position": 1, "answer": FIXTURE[slug]["right"]})
    assert (first.status_code, again.status_code) == (201, 409)
    assert count(session_factory, Attempt) == 1
    report = client.post(f"/api/v1/mock-interviews/{body['id']}/finish").json()
    assert report["items"][0]["correct"] is False and report["score"] == 0.0


def test_the_share_link_comes_from_the_configured_address_never_the_host_header(
    settings: Settings, loaded: None,
) -> None:
    configured = settings.model_copy(update={"public_base_url": "https://drill.example.org"})
    with TestClient(create_app(configured), base_url="http://evil.example") as c:
        c.app.state.clock = FixedClock(T0)  # type: ignore[attr-defined]
        url = start_mock(c)
        answer_current(c, url, "wrong")
        action, hidden = form_fields(parse(c.get(url)), "form.finish-form")
        assert c.post(action, data=hidden, follow_redirects=False).status_code == 303
        action, hidden = form_fields(parse(c.get(f"{url}/report")), "section.share form")
        c.post(action, data=hidden)
        report = parse(c.get(f"{url}/report"))
        link = str(report.select_one("a.share-link")["href"])  # type: ignore[index]
        assert link.startswith("https://drill.example.org/shared/mock/")
        assert "evil.example" not in report.text


@pytest.mark.parametrize(("answers", "kind", "start"), [
    ([("sure", True)] * 4 + [("sure", False)], "good", 'Well calibrated: "sure" was right 80%'),
    ([("sure", True), ("sure", False), ("sure", False), ("sure", False), ("sure", False)], "over",
     'Overconfident: "sure" was right 20% of the time (1 of 5)'),
    ([("guessing", True), ("unsure", True), ("guessing", True), ("sure", True)], "under",
     "Underconfident: when unsure or guessing you were right 100% of the time (3 of 3)"),
    ([("sure", True), (None, False)], "unknown", "Too few answers"),
])
def test_the_calibration_sentence_is_read_from_the_learners_answers(
    answers: list[tuple[str | None, bool]], kind: str, start: str,
) -> None:
    from app.mock.service import calibration


    cal = calibration([Attempt(confidence=c, correct=ok) for c, ok in answers])
    got_kind, sentence = cal.verdict()
    assert got_kind == kind and sentence.startswith(start), sentence


def test_a_mock_interview_never_asks_an_exercise(
    app_client: TestClient, session_factory: sessionmaker[Session], tmp_path: Path,
) -> None:
    import shutil

    from tests.factories import EXERCISE_BANK, copy_bank, import_folder

    # One bank with both: the fixture questions and an exercise (which has a snippet, so the
    # pick's "one question with a snippet" would otherwise reach for it).
    bank = copy_bank(tmp_path / "bank")
    shutil.copytree(EXERCISE_BANK / "drills", bank / "drills")
    import_folder(session_factory, bank)
    for seed in range(5):
        with session_factory.begin() as s:
            m = mock_service.start(db_session=s, learner_id=str(uuid.uuid4()), minutes=25,
                                   now=T0, rng=random.Random(seed))
            types = [q.type for q in s.scalars(select(Question).join(
                QuizItem, QuizItem.question_id == Question.id).where(QuizItem.quiz_id == m.quiz_id))]
        assert types and "exercise" not in types
