"""The class's instructor marks members' talk-through answers with the question's rubric (after
PrairieLearn's manual grading): the queue, the mark replacing the self-score on the class page,
the API and the CSV, the learner reading it, and who may mark; through the pages and the API
(SQLite and PostgreSQL)."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from fastapi.testclient import TestClient

from app.clock import FixedClock
from tests.classes.helpers import add_assignment, csrf_of, join, join_path, make_class, post_form
from tests.factories import T0, Account, form_fields, login, parse

TALK = "step-time-doubled-talk"
TEXT = ("First I would pin the job to yesterday's image, then compare per-rank step times to "
        "find a straggler, diff the environments and profile compute against communication.")


def _talk(client: TestClient, ticked: list[int]) -> int:
    """Answer the talk-through on its own: the text, then the ticks; the attempt's id."""
    r = client.post(f"/api/v1/questions/{TALK}/attempts", json={"answer": {"text": TEXT}})
    assert r.status_code == 200, r.text
    r = client.post(f"/api/v1/questions/{TALK}/attempts", json={"answer": {"ticked": ticked}})
    assert r.status_code == 200, r.text
    return int(r.json()["attempt_id"])


def _class(instructor: TestClient, learner: TestClient, **assignment: Any) -> int:
    class_id = make_class(instructor)
    r = add_assignment(instructor, class_id, due=T0 + timedelta(days=30), **assignment)
    assert r.status_code == 303, r.text
    assert join(learner, join_path(instructor, class_id)).status_code == 303
    return class_id


def _work(instructor: TestClient, class_id: int) -> dict[str, Any]:
    [member] = instructor.get(f"/api/v1/classes/{class_id}").json()["members"]
    return dict(member["work"][0])


def test_an_instructor_marks_a_talk_through_and_the_mark_replaces_the_self_score(
    client: TestClient, more_banks: None, instructor_client: TestClient,
    learner_client: TestClient,
) -> None:
    client.app.state.clock = FixedClock(T0 + timedelta(hours=1))  # type: ignore[attr-defined]
    class_id = _class(instructor_client, learner_client, questions=[TALK, "fixture-single"])
    attempt = _talk(learner_client, [0, 1, 2, 3, 4, 5])  # every move ticked: 100 % by itself
    assert _work(instructor_client, class_id)["score"] == 0.5  # 1 of 2 questions

    # The queue: one answer waiting, the class page links to it.
    assert "/grading" in str(parse(instructor_client.get(f"/classes/{class_id}"))
                             .select_one("a.grading-link")["href"])
    queue = parse(instructor_client.get(f"/classes/{class_id}/grading"))
    [row] = queue.select("table.talk-answers tbody tr")
    assert row["data-attempt"] == str(attempt) and "waiting" in row["class"]
    assert "lena" in row.get_text() and "6/6" in row.get_text()
    # The answer beside the rubric, the member's own ticks named; the model answer folded.
    page = parse(instructor_client.get(f"/classes/{class_id}/grading/{attempt}"))
    assert "pin the job to yesterday's image" in page.select_one(".talk-text").get_text()
    moves = page.select("fieldset.rubric label.rubric-move")
    assert len(moves) == 6 and all(m.select_one(".self-tick") for m in moves)
    assert not any(m.select_one("input")["checked"] if m.select_one("input").has_attr("checked")
                   else False for m in moves)
    # A bad tick or a comment too long: 422 naming the field, nothing saved.
    action, hidden = form_fields(page, "form.grade-form")
    r = instructor_client.post(action, data={**hidden, "ticked": ["0", "9"], "then": "stay"})
    assert r.status_code == 422
    assert parse(r).select_one("#form-error")["data-field"] == "ticked"
    r = instructor_client.post(action, data={**hidden, "ticked": "0", "comment": "x" * 2001})
    assert r.status_code == 422 and parse(r).select_one("#form-error")["data-field"] == "comment"
    assert _work(instructor_client, class_id)["score"] == 0.5
    # Marked: two moves of six, with a comment; "Save and next" goes back to the queue.
    r = instructor_client.post(action, data={**hidden, "ticked": ["0", "2"], "then": "next",
                                             "comment": "Scope it across nodes before diffing."},
                               follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == f"/classes/{class_id}/grading"
    queue = parse(instructor_client.get(f"/classes/{class_id}/grading"))
    assert queue.select_one(".grading-count strong").get_text() == "0"
    assert "2/6" in queue.select_one("table.talk-answers tbody tr").get_text()

    # The class page, the API and the CSV count the mark, not the self-score.
    work = _work(instructor_client, class_id)
    assert abs(work["score"] - (2 / 6) / 2) < 1e-9, work
    rows = list(csv.reader(io.StringIO(instructor_client.get(
        f"/classes/{class_id}/scores.csv").text)))
    assert rows[1][3] == f"{(2 / 6) / 2 * 100:.1f}"
    [listed] = instructor_client.get(f"/api/v1/classes/{class_id}/talk-answers").json()
    assert listed["mark"]["ticked"] == [0, 2] and listed["self_ticked"] == [0, 1, 2, 3, 4, 5]
    assert listed["text"] == TEXT and listed["username"] == "lena"
    # The learner reads the mark and the comment, on their page and in the API.
    page = parse(learner_client.get(f"/classes/{class_id}/me"))
    [card] = page.select("ul.talk-marks li.card")
    assert card.select_one(".talk-mark").get_text() == "2 of 6"
    assert card.select_one(".mark-comment").get_text() == "Scope it across nodes before diffing."
    assert [li["class"] for li in card.select(".rubric-graded li")] == [
        ["made"], ["missed"], ["made"], ["missed"], ["missed"], ["missed"]]
    me = learner_client.get(f"/api/v1/classes/{class_id}/me").json()
    [mark] = me["marks"]
    assert mark["mark"]["ticked"] == [0, 2] and mark["self_score"] == 1.0
    assert abs(me["work"][0]["score"] - (2 / 6) / 2) < 1e-9
    data = learner_client.get("/account/export.json").json()
    assert [m["comment"] for m in data["talk_marks"]] == ["Scope it across nodes before diffing."]
    # Marked again: the new mark replaces the old.
    page = parse(instructor_client.get(f"/classes/{class_id}/grading/{attempt}"))
    assert [i["value"] for i in page.select("fieldset.rubric input[checked]")] == ["0", "2"]
    r = post_form(instructor_client, f"/classes/{class_id}/grading/{attempt}", "form.grade-form",
                  ticked=["0", "1", "2", "3"], then="stay")
    assert r.status_code == 303
    assert abs(_work(instructor_client, class_id)["score"] - (4 / 6) / 2) < 1e-9


def test_a_mock_assignments_talk_through_is_marked_once_the_interview_is_over(
    client: TestClient, more_banks: None, instructor_client: TestClient,
    learner_client: TestClient,
) -> None:
    clock = FixedClock(T0 + timedelta(hours=1))
    client.app.state.clock = clock  # type: ignore[attr-defined]
    class_id = _class(instructor_client, learner_client, kind="mock", title="Mock",
                      minutes="25")
    [assignment] = instructor_client.get(f"/api/v1/classes/{class_id}").json()["assignments"]
    r = post_form(learner_client, f"/classes/{class_id}/me",
                  f"form[action$='/assignments/{assignment['id']}/start']")
    assert r.status_code == 303
    mock_id = r.headers["location"].rstrip("/").rsplit("/", 1)[1]
    items = learner_client.get(f"/api/v1/mock-interviews/{mock_id}").json()["items"]
    [talk] = [i for i in items if i["slug"] == TALK]
    for step in ({"text": TEXT}, {"ticked": [0, 1, 2]}):
        r = learner_client.post(f"/api/v1/mock-interviews/{mock_id}/answers",
                                json={"position": talk["position"], "answer": step})
        assert r.status_code == 201, r.text
    # While the interview runs, its answers are nobody's to mark (nor to score).
    assert instructor_client.get(f"/api/v1/classes/{class_id}/talk-answers").json() == []
    assert learner_client.post(f"/api/v1/mock-interviews/{mock_id}/finish").status_code == 200
    [listed] = instructor_client.get(f"/api/v1/classes/{class_id}/talk-answers").json()
    before = _work(instructor_client, class_id)["score"]
    r = post_form(instructor_client, f"/classes/{class_id}/grading/{listed['attempt_id']}",
                  "form.grade-form", ticked=["0", "1", "2", "3", "4", "5"], then="next")
    assert r.status_code == 303
    after = _work(instructor_client, class_id)["score"]
    assert abs((after - before) * len(items) - (1 - 3 / 6)) < 1e-9, (before, after)


def test_marking_is_the_class_instructors_and_admins_alone(
    client: TestClient, more_banks: None, instructor_client: TestClient,
    learner_client: TestClient, new_client: Callable[..., TestClient],
    make_user: Callable[..., Account],
) -> None:
    client.app.state.clock = FixedClock(T0 + timedelta(hours=1))  # type: ignore[attr-defined]
    class_id = _class(instructor_client, learner_client, questions=[TALK])
    attempt = _talk(learner_client, [0])
    second = _talk(learner_client, [0, 1])  # a later answer: not the one the class counts
    outsider = new_client()
    make_user("olga", "learner")
    assert login(outsider, "olga").status_code == 303
    stranger = _talk(outsider, [0])  # not a member's
    browsers = {"anonymous": new_client(), "member": learner_client, "outsider": outsider}
    for name, role in (("otto", "instructor"), ("alice", "author"), ("root", "admin")):
        make_user(name, role)
        browsers[name] = new_client()
        assert login(browsers[name], name).status_code == 303
    paths = (f"/classes/{class_id}/grading", f"/classes/{class_id}/grading/{attempt}",
             f"/api/v1/classes/{class_id}/talk-answers")
    for who, browser in browsers.items():
        for path in paths:
            r = browser.get(path, follow_redirects=False)
            want = {"anonymous": (303, 401), "member": (403,), "outsider": (403,),
                    "otto": (404,), "alice": (403,), "root": (200,)}[who]
            assert r.status_code in want, (who, path, r.status_code)
            assert TEXT not in r.text or who == "root", (who, path)
        r = browser.post(f"/classes/{class_id}/grading/{attempt}",
                         data={"csrf_token": csrf_of(browser) if who != "anonymous" else "",
                               "ticked": "0"}, follow_redirects=False)
        assert r.status_code in ((303,) if who == "root" else (401, 403, 404)), (who, r.status_code)
    # The class's instructor reaches only the answers the class counts.
    token = csrf_of(instructor_client)
    for other in (second, stranger, 999999, 2**31 + 5):
        r = instructor_client.get(f"/classes/{class_id}/grading/{other}")
        assert r.status_code in (404, 422), (other, r.status_code)
        r = instructor_client.post(f"/classes/{class_id}/grading/{other}",
                                   data={"csrf_token": token, "ticked": "0"})
        assert r.status_code in (404, 422), (other, r.status_code)
    # An admin's mark counts like the instructor's.
    assert _work(instructor_client, class_id)["score"] == 1 / 6


def test_a_mark_waits_while_its_question_is_in_the_members_live_mock(
    client: TestClient, more_banks: None, instructor_client: TestClient,
    learner_client: TestClient,
) -> None:
    client.app.state.clock = FixedClock(T0 + timedelta(hours=1))  # type: ignore[attr-defined]
    class_id = _class(instructor_client, learner_client, questions=[TALK])
    attempt = _talk(learner_client, [0])
    r = post_form(instructor_client, f"/classes/{class_id}/grading/{attempt}", "form.grade-form",
                  ticked=["0", "1"], comment="Better than you think.", then="stay")
    assert r.status_code == 303
    assert len(learner_client.get(f"/api/v1/classes/{class_id}/me").json()["marks"]) == 1
    mock = learner_client.post("/api/v1/mock-interviews", json={"minutes": 25}).json()
    assert TALK in {i["slug"] for i in mock["items"]}
    assert learner_client.get(f"/api/v1/classes/{class_id}/me").json()["marks"] == []
    page = learner_client.get(f"/classes/{class_id}/me").text
    assert "Better than you think." not in page
    assert "Better than you think." not in learner_client.get("/account/export.json").text
    learner_client.post(f"/api/v1/mock-interviews/{mock['id']}/finish")
    assert len(learner_client.get(f"/api/v1/classes/{class_id}/me").json()["marks"]) == 1
