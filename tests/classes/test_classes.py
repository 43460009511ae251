"""Classes end to end over HTTP: making a class and its join link, joining after seeing what the
instructor will see, assignments and what counts as doing them (the window, first attempts,
late work), the class page's completion, mastery and who is behind, the CSV, and leaving."""

from __future__ import annotations

import csv
import io
import threading
from collections.abc import Callable
from datetime import timedelta

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from fsrs.scheduler import DEFAULT_PARAMETERS
from sqlalchemy import Engine, event
from sqlalchemy.orm import Session, sessionmaker
from typer.testing import CliRunner

from app.accounts import service as accounts
from app.accounts.service import account_learner_id
from app.classes import assignments, class_page, service
from app.classes.models import Assignment, AssignmentStart, ClassMember
from app.cli import app as cli_app
from app.clock import FixedClock
from app.progress import service as progress
from app.questions import service as questions_service
from app.quizzes.models import Quiz, QuizItem
from app.quizzes.service import answer_question, drawn_variant, record_exercise_pass
from app.review.models import LearnerSchedule
from tests.classes.helpers import add_assignment, csrf_of, join, join_path, make_class, post_form
from tests.factories import FIXTURE, PASSWORD, T0, Account, answer, count, form_fields, login, parse, text

ALL_BASICS = ["fixture-single", "fixture-multi", "fixture-numeric"]
# Every class here assigns the fixture bank's questions.
pytestmark = pytest.mark.usefixtures("loaded")


def _member_row(page: object, pseudonym: str, table: str = "table.completion") -> object:
    row = parse(page).select_one(f"{table} tr[data-member='{pseudonym}']")  # type: ignore[arg-type]
    assert row is not None, f"no row for {pseudonym}"
    return row


def _pseudonym(session_factory: sessionmaker[Session], username_id: int) -> str:
    with session_factory() as s:
        member = s.query(ClassMember).filter_by(user_id=username_id).one()
        return member.pseudonym


def test_a_class_from_join_link_to_a_late_assignment_in_the_csv(
    instructor_client: TestClient, learner_client: TestClient, learner_account: Account,
    clock: FixedClock, session_factory: sessionmaker[Session],
) -> None:
    class_id = make_class(instructor_client)
    path = join_path(instructor_client, class_id)
    r = add_assignment(instructor_client, class_id, title="Basics by Tuesday",
                       questions=ALL_BASICS, due=T0 + timedelta(days=1))
    assert r.status_code == 303, r.text

    # Before joining, the learner reads what the instructor will see.
    preview = parse(learner_client.get(path))
    assert "What ida will see of you" in text(preview)
    assert "mastery per topic" in text(preview.select_one("ul.disclosure"))
    assert count(session_factory, ClassMember) == 0
    r = join(learner_client, path)
    assert r.status_code == 303 and r.headers["location"] == f"/classes/{class_id}/me"
    pseudonym = _pseudonym(session_factory, learner_account.id)

    # Two days on, past the due date, the learner does the assignment from their class page.
    clock.advance(timedelta(days=2))
    r = post_form(learner_client, f"/classes/{class_id}/me", "li[data-assignment] form")
    assert r.status_code == 303 and r.headers["location"].startswith("/quizzes/")
    quiz_url = r.headers["location"]
    for _ in ALL_BASICS:
        page = parse(learner_client.get(quiz_url, follow_redirects=True))
        slug = str(page.select_one("article.question p.hint a[href^='/questions/']")["href"]).split("/")[-1]
        action, hidden = form_fields(page, "form.answer-form")
        right = FIXTURE[slug]["right" if slug != "fixture-numeric" else "wrong"]
        assert learner_client.post(action, data={**hidden, "answer": right}).status_code == 200

    # The instructor sees it done, marked late, with the score of the first answers.
    page = instructor_client.get(f"/classes/{class_id}")
    cell = _member_row(page, pseudonym).select_one("td[data-assignment]")  # type: ignore[attr-defined]
    assert text(cell) == "late 67%"
    assert "1/1" not in text(parse(page).select_one("table.assignments"))
    assignments = parse(page).select_one("table.assignments tbody tr")
    assert [text(td) for td in assignments.select("td.num")] == ["0/1", "1", "0"]

    csv_response = instructor_client.get(f"/classes/{class_id}/scores.csv")
    assert csv_response.headers["content-type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(csv_response.text)))
    assert rows[0][:3] == ["class_id", "username", "joined_at"]
    assert rows[1][:2] == [pseudonym, "lena"]
    assert rows[1][3:6] == ["66.7", "late", (T0 + timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%SZ")]


def _cell(client: TestClient, class_id: int, pseudonym: str) -> str:
    row = _member_row(client.get(f"/classes/{class_id}"), pseudonym)
    return text(row.select_one("td[data-assignment]"))  # type: ignore[attr-defined]


def test_only_first_answers_since_the_opening_and_the_joining_count(
    instructor_client: TestClient, learner_client: TestClient, learner_account: Account,
    clock: FixedClock, session_factory: sessionmaker[Session],
) -> None:
    class_id = make_class(instructor_client)
    assert add_assignment(instructor_client, class_id, questions=ALL_BASICS,
                          opens=T0 + timedelta(hours=2), due=T0 + timedelta(days=1)).status_code == 303
    # Before joining: a right answer the class never sees.
    answer(learner_client, "fixture-single", FIXTURE["fixture-single"]["right"])
    clock.advance(timedelta(hours=1))
    assert join(learner_client, join_path(instructor_client, class_id)).status_code == 303
    pseudonym = _pseudonym(session_factory, learner_account.id)
    # Joined, but before the opening: not counted either.
    answer(learner_client, "fixture-multi", FIXTURE["fixture-multi"]["right"])
    assert _cell(instructor_client, class_id, pseudonym) == "not open"
    member_page = parse(learner_client.get(f"/classes/{class_id}/me"))
    assert member_page.select_one("li[data-assignment] form") is None  # nothing to start yet

    clock.advance(timedelta(hours=2))
    assert _cell(instructor_client, class_id, pseudonym) == "not started"
    # The first answer in the window counts; a second, right one does not replace it.
    answer(learner_client, "fixture-multi", FIXTURE["fixture-multi"]["wrong"])
    answer(learner_client, "fixture-multi", FIXTURE["fixture-multi"]["right"])
    answer(learner_client, "fixture-single", FIXTURE["fixture-single"]["wrong"])
    assert _cell(instructor_client, class_id, pseudonym) == "in progress 0%"
    answer(learner_client, "fixture-numeric", FIXTURE["fixture-numeric"]["right"])
    assert _cell(instructor_client, class_id, pseudonym) == "done 33%"
    # The learner's own page says the same.
    mine = parse(learner_client.get(f"/classes/{class_id}/me"))
    assert "done" in text(mine.select_one("li[data-assignment] .st"))
    assert "score 33%" in text(mine.select_one("li[data-assignment]"))


def test_a_topic_quiz_is_done_after_its_count_of_questions_answered_anywhere(
    instructor_client: TestClient, learner_client: TestClient, learner_account: Account,
    clock: FixedClock, session_factory: sessionmaker[Session],
) -> None:
    class_id = make_class(instructor_client)
    assert add_assignment(instructor_client, class_id, topics=["traces"], count="1").status_code == 303
    join(learner_client, join_path(instructor_client, class_id))
    pseudonym = _pseudonym(session_factory, learner_account.id)
    # A question of another topic does not count; one of the topic, on its own page, does.
    answer(learner_client, "fixture-single", FIXTURE["fixture-single"]["right"])
    assert _cell(instructor_client, class_id, pseudonym) == "not started"
    answer(learner_client, "fixture-trace-join", FIXTURE["fixture-trace-join"]["right"])
    assert _cell(instructor_client, class_id, pseudonym) == "done 100%"
    # Starting it now gives a quiz of the topic's question not answered yet.
    r = post_form(learner_client, f"/classes/{class_id}/me", "li[data-assignment] form")
    quiz = parse(learner_client.get(r.headers["location"], follow_redirects=True))
    link = quiz.select_one("article.question p.hint a[href^='/questions/']")
    assert link is not None and link["href"] == "/questions/fixture-trace-buckets"
    # Starting again resumes the same quiz.
    again = post_form(learner_client, f"/classes/{class_id}/me", "li[data-assignment] form")
    assert again.headers["location"] == r.headers["location"]


def test_a_mock_interview_assignment_is_done_when_the_interview_is_over(
    instructor_client: TestClient, learner_client: TestClient, learner_account: Account,
    clock: FixedClock, session_factory: sessionmaker[Session],
) -> None:
    class_id = make_class(instructor_client)
    assert add_assignment(instructor_client, class_id, kind="mock", minutes="10",
                          due=T0 + timedelta(minutes=30)).status_code == 303
    join(learner_client, join_path(instructor_client, class_id))
    pseudonym = _pseudonym(session_factory, learner_account.id)
    r = post_form(learner_client, f"/classes/{class_id}/me", "li[data-assignment] form")
    assert r.status_code == 303 and r.headers["location"].startswith("/mock/")
    mock_url = r.headers["location"]
    page = parse(learner_client.get(mock_url))
    slug = str(page.select_one("article.question[data-slug]")["data-slug"])
    action, hidden = form_fields(page, "form.answer-form")
    learner_client.post(action, data={**hidden, "answer": FIXTURE[slug]["right"]})
    assert _cell(instructor_client, class_id, pseudonym) == "in progress"
    # The deadline passes with the rest unanswered: the interview is over, so it is done.
    clock.advance(timedelta(minutes=11))
    with session_factory() as s:
        report = class_page.class_report(db_session=s, classroom=service.get_class(
            db_session=s, class_id=class_id), now=clock.now())  # type: ignore[arg-type]
        work = report.members[0].work[report.assignments[0].assignment.id]
    items = count(session_factory, QuizItem)
    assert work.done_at == T0 + timedelta(minutes=10)
    assert abs(work.score - 1 / items) < 1e-9
    assert _cell(instructor_client, class_id, pseudonym) == f"done {round(100 / items)}%"


def test_the_heatmap_shows_each_members_dashboard_mastery(
    instructor_client: TestClient, learner_client: TestClient, learner_account: Account,
    new_client: Callable[..., TestClient], make_user: Callable[..., Account], clock: FixedClock,
    session_factory: sessionmaker[Session],
) -> None:
    """The SQL that sums recall for a whole class agrees with the dashboard's Python, topic by
    topic, days after the answers (so the forgetting curve is in play), for a learner with the
    default weights and one with fitted ones, on both databases."""
    class_id = make_class(instructor_client)
    path = join_path(instructor_client, class_id)
    make_user("omar", "learner")
    omar = new_client()
    assert login(omar, "omar").status_code == 303
    for browser in (learner_client, omar):
        join(browser, path)
    answer(learner_client, "fixture-single", FIXTURE["fixture-single"]["right"], "sure")
    answer(learner_client, "fixture-trace-join", FIXTURE["fixture-trace-join"]["right"], "unsure")
    answer(learner_client, "fixture-multi", FIXTURE["fixture-multi"]["wrong"])
    clock.advance(timedelta(days=1, hours=5))
    answer(omar, "fixture-numeric", FIXTURE["fixture-numeric"]["right"])
    clock.advance(timedelta(days=3, hours=7))
    # Lena's weights were fitted: a steeper forgetting curve of her own (FSRS-6's w20).
    fitted = list(DEFAULT_PARAMETERS)
    fitted[20] = 0.45
    with session_factory.begin() as s:
        lena_learner = s.query(ClassMember).filter_by(user_id=learner_account.id).one().learner_id
        s.add(LearnerSchedule(learner_id=lena_learner, parameters=fitted, desired_retention=0.85))
    with session_factory() as s:
        topics, by_member = class_page.mastery_by_member(db_session=s, class_id=class_id, now=clock.now())
        members = {m.user_id: m for m in s.query(ClassMember).filter_by(class_id=class_id)}
        checked = 0
        for user_id, member in members.items():
            dash = progress.dashboard(db_session=s, learner_id=member.learner_id, now=clock.now())
            expected = {m.slug: m.recall for m in dash.mastery}
            assert [slug for slug, _ in topics] == list(expected)
            got = dict(zip([slug for slug, _ in topics], by_member[member.id], strict=True))
            for slug, recall in expected.items():
                assert abs(got[slug] - recall) < 1e-9, (user_id, slug, got[slug], recall)
                checked += recall > 0
    assert checked == 3  # lena's two topics and omar's one have recall to compare
    page = parse(instructor_client.get(f"/classes/{class_id}"))
    pseudonym = members[learner_account.id].pseudonym
    # Each round's table (one click below the rounds' summary) holds its topics' cells.
    cells = {}
    for table in page.select("table.heatmap"):
        titles = [th["title"] for th in table.select("thead th.topic")]
        row = table.select_one(f"tr[data-member='{pseudonym}']")
        cells.update(zip(titles, row.select("td"), strict=True))
    mine = by_member[members[learner_account.id].id]
    values = dict(zip([title for _slug, title in topics], mine, strict=True))
    assert {t: text(td) for t, td in cells.items()} == {t: str(round(v * 100)) for t, v in values.items()}
    assert all(cells[t]["class"] == [f"m{class_page.mastery_level(v)}"] for t, v in values.items())
    # The summary: a member's mastery of a round is the mean over its questions.
    summary = page.select_one(f"table.round-heatmap tr[data-member='{pseudonym}']")
    assert summary is not None and len(summary.select("td")) == len(page.select("table.heatmap"))


def test_who_is_behind_lists_members_with_an_overdue_assignment(
    instructor_client: TestClient, learner_client: TestClient, new_client: Callable[..., TestClient],
    make_user: Callable[..., Account], clock: FixedClock,
) -> None:
    class_id = make_class(instructor_client)
    path = join_path(instructor_client, class_id)
    assert add_assignment(instructor_client, class_id, title="Single", questions=["fixture-single"],
                          due=T0 + timedelta(hours=1)).status_code == 303
    make_user("omar", "learner")
    omar = new_client()
    login(omar, "omar")
    join(learner_client, path)
    join(omar, path)
    answer(learner_client, "fixture-single", FIXTURE["fixture-single"]["right"])
    page = parse(instructor_client.get(f"/classes/{class_id}"))
    assert page.select("ul.behind li") == []  # not due yet
    clock.advance(timedelta(hours=2))
    page = parse(instructor_client.get(f"/classes/{class_id}"))
    assert [text(li).split(" ")[0] for li in page.select("ul.behind li")] == ["omar"]
    assert "1 overdue — Single" in text(page.select_one("ul.behind li"))


def test_leaving_hides_the_learner_and_joining_again_restores_the_same_member(
    instructor_client: TestClient, learner_client: TestClient, learner_account: Account,
    clock: FixedClock, session_factory: sessionmaker[Session],
) -> None:
    class_id = make_class(instructor_client)
    path = join_path(instructor_client, class_id)
    add_assignment(instructor_client, class_id, questions=["fixture-single"])
    join(learner_client, path)
    answer(learner_client, "fixture-single", FIXTURE["fixture-single"]["right"])
    pseudonym = _pseudonym(session_factory, learner_account.id)
    assert _cell(instructor_client, class_id, pseudonym) == "done 100%"
    r = post_form(learner_client, f"/classes/{class_id}/me", "form.leave-form")
    assert r.status_code == 303 and r.headers["location"] == "/account#classes"
    page = instructor_client.get(f"/classes/{class_id}")
    assert "lena" not in page.text and pseudonym not in page.text
    assert "lena" not in instructor_client.get(f"/classes/{class_id}/scores.csv").text
    assert learner_client.get(f"/classes/{class_id}/me").status_code == 404
    assert "You are in no class" in text(parse(learner_client.get("/account")))
    # Back through the link: the same member, class id and work (leaving resets nothing).
    clock.advance(timedelta(minutes=5))
    join(learner_client, path)
    assert _pseudonym(session_factory, learner_account.id) == pseudonym
    assert _cell(instructor_client, class_id, pseudonym) == "done 100%"


def test_the_join_link_can_be_replaced_and_closed(
    instructor_client: TestClient, learner_client: TestClient, client: TestClient, clock: FixedClock,
) -> None:
    class_id = make_class(instructor_client)
    old = join_path(instructor_client, class_id)
    replace, close = "#join form[action$='/link']", "#join form[action$='/revoke']"
    assert post_form(instructor_client, f"/classes/{class_id}", replace).status_code == 303
    new = join_path(instructor_client, class_id)
    assert new != old and len(new.rsplit("/", 1)[1]) >= 32
    assert learner_client.get(old).status_code == 404
    assert learner_client.get(new).status_code == 200
    assert post_form(instructor_client, f"/classes/{class_id}", close).status_code == 303
    assert parse(instructor_client.get(f"/classes/{class_id}")).select_one("#join-url") is None
    assert learner_client.get(new).status_code == 404
    token = csrf_of(learner_client)
    assert learner_client.post(new, data={"csrf_token": token}).status_code == 404
    # A signed-out visitor with a live link is asked to sign in or sign up, and comes back.
    post_form(instructor_client, f"/classes/{class_id}", replace)
    live = join_path(instructor_client, class_id)
    anonymous = parse(client.get(live))
    assert anonymous.select_one("form.join-form") is None
    assert anonymous.select_one(f"a[href='/signup?next={live}']") is not None


def test_sign_up_from_a_join_link_comes_back_to_it(
    instructor_client: TestClient, new_client: Callable[..., TestClient], clock: FixedClock,
    session_factory: sessionmaker[Session],
) -> None:
    class_id = make_class(instructor_client)
    live = join_path(instructor_client, class_id)
    browser = new_client()
    action, hidden = form_fields(parse(browser.get(f"/signup?next={live}")), "form.signup-form")
    assert hidden["next"] == live
    r = browser.post(action, data={**hidden, "username": "newt", "password": PASSWORD},
                     follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == live
    assert join(browser, live).status_code == 303
    assert count(session_factory, ClassMember) == 1


def test_the_data_download_lists_classes_and_deleting_the_account_leaves_them(
    instructor_client: TestClient, learner_client: TestClient, learner_account: Account,
    clock: FixedClock, session_factory: sessionmaker[Session],
) -> None:
    class_id = make_class(instructor_client, "Cohort 7")
    add_assignment(instructor_client, class_id, kind="mock", minutes="10")
    join(learner_client, join_path(instructor_client, class_id))
    post_form(learner_client, f"/classes/{class_id}/me", "li[data-assignment] form")
    pseudonym = _pseudonym(session_factory, learner_account.id)
    data = learner_client.get("/account/export.json").json()
    assert data["class_memberships"] == [{"class": "Cohort 7", "instructor": "ida",
                                          "class_id": pseudonym, "joined_at": T0.isoformat(),
                                          "left_at": None}]
    account = parse(learner_client.get("/account"))
    assert "Cohort 7" in text(account.select_one("ul.my-classes"))
    r = post_form(learner_client, "/account", "form.delete-account", confirm="lena")
    assert r.status_code == 200 and "took you out of 1 class" in text(parse(r))
    assert count(session_factory, ClassMember) == 0
    assert count(session_factory, AssignmentStart) == 0
    assert pseudonym not in instructor_client.get(f"/classes/{class_id}").text


def test_an_admin_makes_an_instructor_who_is_no_author(
    admin_client: TestClient, new_client: Callable[..., TestClient], client: TestClient,
) -> None:
    page = parse(admin_client.get("/admin/users"))
    assert "instructor" in [o["value"] for o in page.select("#nu-role option")]
    r = post_form(admin_client, "/admin/users", "form.create-user", username="ivy",
                  password=PASSWORD, role="instructor")
    assert r.status_code == 303
    ivy = new_client()
    assert login(ivy, "ivy").headers["location"] == "/classes"
    assert ivy.get("/author", follow_redirects=False).status_code == 403
    assert ivy.get("/account", follow_redirects=False).status_code == 403
    assert parse(ivy.get("/me/nav")).select_one("a[href='/classes']") is not None
    assert ivy.get("/classes").status_code == 200


def test_the_assignment_form_names_the_field_at_fault(
    instructor_client: TestClient, more_banks: None, clock: FixedClock,
) -> None:
    class_id = make_class(instructor_client)
    cases = [
        ({"questions": ["fixture-single"], "due": T0 - timedelta(hours=1)}, "due_at", "after the opening"),
        ({"questions": ["no-such-question"]}, "questions", "Not a published question"),
        ({"exercises": ["fixture-exercise"], "kind": "quiz"}, "questions", "Pick the topics or questions"),
        ({"questions": ["fixture-single"], "kind": "exercises"}, "questions", "Pick the exercises"),
        ({"kind": "mock", "minutes": "3"}, "minutes", "10 to 45"),
        ({"topics": ["traces"], "count": "99"}, "count", "1 to 30"),
        ({"questions": ["ring-send-volume"], "variant-ring-send-volume": "40"}, "variant-ring-send-volume",
         "variants 0 to"),
        ({"questions": ["fixture-single"], "title": "  "}, "title", "title"),
    ]
    for fields, field, message in cases:
        r = add_assignment(instructor_client, class_id, **fields)
        assert r.status_code == 422, (fields, r.status_code)
        error = parse(r).select_one("#form-error")
        assert error is not None and message in text(error), (fields, text(error))
        assert error["data-field"] == field, (fields, error["data-field"])
    page = parse(instructor_client.get(f"/classes/{class_id}/assignments/new"))
    action, hidden = form_fields(page, "form.assignment-form")
    r = instructor_client.post(action, data={**hidden, "title": "x", "kind": "quiz", "opens_at": "soon",
                                             "due_at": "2026-03-09T09:00", "questions": "fixture-single"})
    assert r.status_code == 422 and "YYYY-MM-DDTHH:MM" in text(parse(r).select_one("#form-error"))


def test_a_picked_variant_is_shown_as_it_renders_pinned_in_the_quiz_and_alone_counts(
    instructor_client: TestClient, learner_client: TestClient, learner_account: Account,
    more_banks: None, clock: FixedClock, session_factory: sessionmaker[Session],
) -> None:
    class_id = make_class(instructor_client)
    page = parse(instructor_client.get(f"/classes/{class_id}/assignments/new"))
    options = [o.get_text() for o in page.select("select[name='variant-ring-send-volume'] option")]
    assert options[0] == "any variant" and options[2] == "variant 2 (world_size=2, tensor_mb=800)"
    assert add_assignment(instructor_client, class_id, title="Ring", questions=["ring-send-volume"],
                          **{"variant-ring-send-volume": "1"}).status_code == 303
    page = parse(instructor_client.get(f"/classes/{class_id}"))
    link = page.select_one("table.assignments a")
    detail = parse(instructor_client.get(str(link["href"])))
    item = text(detail.select_one("ol.assigned-questions li"))
    assert "Everyone gets variant 2 (world_size=2, tensor_mb=800)" in item
    assert "2 ranks all-reduce a 800 MB gradient buffer" in item

    # The learner answers the variant drawn for them; if that is the picked one, once before
    # joining (which the class does not count), so that the next draw is another.
    with session_factory.begin() as s:
        learner = account_learner_id(db_session=s, user_id=learner_account.id)
        question = questions_service.published_question(db_session=s, slug="ring-send-volume")
        assert question is not None
        if drawn_variant(db_session=s, learner_id=learner, question_id=question.id, count=8) == 1:
            answer_question(db_session=s, learner_id=learner, question=question, raw_answer="800",
                            token=None, variant=1, now=clock.now())
    clock.advance(timedelta(minutes=1))
    join(learner_client, join_path(instructor_client, class_id))
    pseudonym = _pseudonym(session_factory, learner_account.id)
    # An answer to another variant than the picked one is not the assignment's.
    with session_factory.begin() as s:
        member = s.query(ClassMember).one()
        question = questions_service.published_question(db_session=s, slug="ring-send-volume")
        assert question is not None
        other = drawn_variant(db_session=s, learner_id=member.learner_id, question_id=question.id,
                              count=8)
        assert other != 1
        answer_question(db_session=s, learner_id=member.learner_id, question=question,
                        raw_answer="200", token=None, variant=other, now=clock.now())
    assert _cell(instructor_client, class_id, pseudonym) == "not started"
    # The quiz started from the assignment asks the picked numbers, and its answer counts.
    r = post_form(learner_client, f"/classes/{class_id}/me", "li[data-assignment] form")
    quiz = parse(learner_client.get(r.headers["location"], follow_redirects=True))
    assert "2 ranks all-reduce a 800 MB gradient buffer" in text(quiz.select_one(".prompt"))
    action, hidden = form_fields(quiz, "form.answer-form")
    learner_client.post(action, data={**hidden, "answer": "800"})
    assert _cell(instructor_client, class_id, pseudonym) == "done 100%"


def test_an_exercise_assignment_is_done_by_passing_the_exercises(
    instructor_client: TestClient, learner_client: TestClient, learner_account: Account,
    more_banks: None, clock: FixedClock, session_factory: sessionmaker[Session],
) -> None:
    class_id = make_class(instructor_client)
    # An exercise's pass is stamped with the wall clock (not the app's), hence the far due date.
    assert add_assignment(instructor_client, class_id, kind="exercises", exercises=["fixture-exercise"],
                          due=T0 + timedelta(days=365 * 50)).status_code == 303
    join(learner_client, join_path(instructor_client, class_id))
    pseudonym = _pseudonym(session_factory, learner_account.id)
    mine = parse(learner_client.get(f"/classes/{class_id}/me"))
    assert mine.select_one("li[data-assignment] form") is None
    assert mine.select_one("li[data-assignment] a[href='/exercises/fixture-exercise']") is not None
    # A passing submission is stored by the exercise service as a correct attempt.
    with session_factory.begin() as s:
        member = s.query(ClassMember).one()
        question = questions_service.published_question(db_session=s, slug="fixture-exercise")
        assert question is not None
        record_exercise_pass(db_session=s, learner_id=member.learner_id, question_id=question.id,
                             revision_id=question.revision_id, code="pass", token="t1")
    assert _cell(instructor_client, class_id, pseudonym) == "done 100%"


def test_csv_cells_a_spreadsheet_would_run_are_quoted(
    instructor_client: TestClient, learner_client: TestClient, clock: FixedClock,
) -> None:
    class_id = make_class(instructor_client)
    add_assignment(instructor_client, class_id, title='=HYPERLINK("http://x")',
                   questions=["fixture-single"])
    join(learner_client, join_path(instructor_client, class_id))
    header = next(csv.reader(io.StringIO(instructor_client.get(f"/classes/{class_id}/scores.csv").text)))
    assert header[3].startswith("'=HYPERLINK")


def test_the_api_shows_an_instructor_their_class_and_a_member_their_own_work(
    instructor_client: TestClient, learner_client: TestClient, learner_account: Account,
    clock: FixedClock, session_factory: sessionmaker[Session],
) -> None:
    class_id = make_class(instructor_client, "API class")
    add_assignment(instructor_client, class_id, questions=["fixture-single"])
    join(learner_client, join_path(instructor_client, class_id))
    answer(learner_client, "fixture-single", FIXTURE["fixture-single"]["right"])
    pseudonym = _pseudonym(session_factory, learner_account.id)
    assert instructor_client.get("/api/v1/classes").json()[0]["members"] == 1
    report = instructor_client.get(f"/api/v1/classes/{class_id}").json()
    assert report["assignments"][0]["done"] == 1
    member = report["members"][0]
    assert (member["class_id"], member["username"]) == (pseudonym, "lena")
    assert member["work"][0]["status"] == "done" and member["work"][0]["score"] == 1.0
    assert [t["slug"] for t in report["topics"]] == ["basics", "traces"]
    mine = learner_client.get(f"/api/v1/classes/{class_id}/me").json()
    assert mine["class_id"] == pseudonym and mine["work"][0]["status"] == "done"
    assert learner_client.get(f"/api/v1/classes/{class_id}").status_code == 403
    assert instructor_client.get(f"/api/v1/classes/{class_id}/me").status_code == 403


def test_the_command_line_makes_an_instructor(
    cli_env: CliRunner, session_factory: sessionmaker[Session],
) -> None:
    help_text = " ".join(cli_env.invoke(cli_app, ["admin", "create", "--help"]).output.split())
    assert "author, admin or instructor" in help_text
    r = cli_env.invoke(cli_app, ["admin", "create", "ivy", "--role", "instructor", "--password-stdin"],
                       input=PASSWORD + "\n", prog_name="ddpdrill")
    assert r.exit_code == 0, r.output
    assert "Created instructor ivy." in r.output
    with session_factory() as s:
        user = accounts.get_user_by_name(db_session=s, username="ivy")
        assert user is not None and user.is_instructor and not user.is_staff


def test_the_class_report_sends_the_same_few_statements_for_any_class_size(
    instructor_client: TestClient, new_client: Callable[..., TestClient],
    make_user: Callable[..., Account], clock: FixedClock, session_factory: sessionmaker[Session],
    db_engine: Engine,
) -> None:
    class_id = make_class(instructor_client)
    path = join_path(instructor_client, class_id)
    add_assignment(instructor_client, class_id, title="Fixed", questions=ALL_BASICS)
    add_assignment(instructor_client, class_id, title="Topic", topics=["traces"], count="1")
    add_assignment(instructor_client, class_id, title="Mock", kind="mock", minutes="10")

    def statements() -> int:
        sent: list[str] = []

        def count(_conn: object, _cursor: object, statement: str, *_: object) -> None:
            sent.append(statement)

        event.listen(db_engine, "before_cursor_execute", count)
        try:
            with session_factory() as s:
                classroom = service.get_class(db_session=s, class_id=class_id)
                assert classroom is not None
                sent.clear()
                class_page.class_report(db_session=s, classroom=classroom, now=clock.now())
        finally:
            event.remove(db_engine, "before_cursor_execute", count)
        return len([st for st in sent if not st.startswith("BEGIN")])

    sizes = []
    for n in range(4):
        make_user(f"member{n}", "learner")
        browser = new_client()
        login(browser, f"member{n}")
        join(browser, path)
        answer(browser, "fixture-single", FIXTURE["fixture-single"]["right"])
        post_form(browser, f"/classes/{class_id}/me", "li[data-assignment] form")
        sizes.append(statements())
    assert sizes == [sizes[0]] * 4 and sizes[0] <= 7, sizes


def test_two_starts_at_once_make_one_quiz(
    instructor_client: TestClient, learner_client: TestClient, clock: FixedClock,
    session_factory: sessionmaker[Session], db_engine: Engine,
) -> None:
    """Start pressed twice at once: the second waits on the first (SQLite's write lock, or
    PostgreSQL's unique index), then takes the first one's quiz; no second quiz is left."""
    class_id = make_class(instructor_client)
    add_assignment(instructor_client, class_id, questions=ALL_BASICS)
    join(learner_client, join_path(instructor_client, class_id))
    with session_factory() as s:
        member = s.query(ClassMember).one()
        assignment_id = assignments.class_assignments(db_session=s, class_id=class_id)[0].id
        member_id = member.id

    def start(session: Session) -> str:
        assignment, m = session.get(Assignment, assignment_id), session.get(ClassMember, member_id)
        assert assignment is not None and m is not None
        return assignments.start(db_session=session, assignment=assignment, member=m, now=clock.now()).id

    first = session_factory()
    first_quiz = start(first)
    second: dict[str, str] = {}

    def other() -> None:
        with session_factory() as s:
            second["quiz"] = start(s)
            s.commit()

    thread = threading.Thread(target=other)
    thread.start()
    if db_engine.dialect.name == "postgresql":
        # Commit only once the second start waits on the first one's row. (Autocommit: a
        # transaction would see pg_stat_activity as it was when it began.)
        with db_engine.connect().execution_options(isolation_level="AUTOCOMMIT") as watch:
            while not watch.execute(sa.text(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND query LIKE 'INSERT INTO class_assignment_starts%'")).scalar():
                thread.join(0.01)
    first.commit()
    first.close()
    thread.join()
    assert second["quiz"] == first_quiz
    assert count(session_factory, AssignmentStart) == 1
    assert count(session_factory, Quiz) == 1


def test_titles_on_the_class_page_are_text_not_markup(
    instructor_client: TestClient, learner_client: TestClient, clock: FixedClock,
) -> None:
    class_id = make_class(instructor_client, "<i>Class</i>")
    add_assignment(instructor_client, class_id, title="<b>Week</b>", questions=["fixture-single"],
                   due=T0 + timedelta(hours=1))
    join(learner_client, join_path(instructor_client, class_id))
    clock.advance(timedelta(hours=2))
    page = instructor_client.get(f"/classes/{class_id}")
    assert "<b>" not in page.text and "<i>" not in page.text
    behind = parse(page).select_one("ul.behind li")
    assert behind is not None and text(behind).endswith("1 overdue — <b>Week</b>")
