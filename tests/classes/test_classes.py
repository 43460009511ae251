"""Classes end to end over HTTP: making a class and its join link, joining after seeing what the
instructor will see, assignments and what counts as doing them (the window, first attempts,
late work), the class page's completion, mastery and who is behind, the CSV, and leaving."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from app.classes import service
from app.classes.models import ClassMember
from app.clock import FixedClock
from tests.classes.helpers import add_assignment, join, join_path, make_class, post_form
from tests.factories import FIXTURE, T0, Account, answer, count, form_fields, parse, text

ALL_BASICS = ["fixture-single", "fixture-multi", "fixture-numeric"]


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
