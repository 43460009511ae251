"""Small things a learner meets: a question's back link names its topic and leads on to the next
question in it; a quiz filter that matches nothing keeps the choices and says so on the form."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.factories import form_fields, parse, text


def test_a_question_links_back_to_its_topic_by_title_and_on_to_the_next(client: TestClient) -> None:
    # Basics in difficulty order: fixture-single (1), fixture-multi (2), fixture-numeric (3).
    page = parse(client.get("/questions/fixture-single"))
    back = page.select_one("p.back a")
    assert back["href"] == "/topics/basics" and text(back) == "← Basics"
    assert "question 1 of 3" in text(page.select_one("p.back"))
    following = page.select_one("a.next-question")
    assert following["href"] == "/questions/fixture-multi"
    assert "Next question in Basics" in text(following)
    # The last one in the topic says so and leads back to the topic instead.
    last = parse(client.get("/questions/fixture-numeric"))
    assert last.select_one("a.next-question") is None
    assert "last question in Basics" in text(last.select_one("nav.topic-next"))


def test_the_next_link_stays_after_answering(client: TestClient) -> None:
    page = parse(client.get("/questions/fixture-single"))
    action, hidden = form_fields(page, "form#answer-form")
    graded = parse(client.post(action, data={**hidden, "answer": "b"}))
    assert graded.select_one("a.next-question")["href"] == "/questions/fixture-multi"


def test_a_quiz_filter_that_matches_nothing_keeps_the_choices_and_says_so(
    client: TestClient,
) -> None:
    home = parse(client.get("/topics"))
    action, hidden = form_fields(home, "form.quiz-form")
    # Traces has difficulties 2 and 3 only.
    response = client.post(action, data={**hidden, "topics": "traces", "difficulty": "1",
                                         "count": "10"}, follow_redirects=False)
    assert response.status_code == 422
    page = parse(response)
    form = page.select_one("form.quiz-form")
    assert "No published question matches" in text(form.select_one(".error"))
    assert [i["value"] for i in form.select("input[name=topics][checked]")] == ["traces"]
    assert form.select_one("select[name=difficulty] option[selected]")["value"] == "1"
    assert form.select_one("select[name=count] option[selected]")["value"] == "10"
    # The form still works from there.
    action, hidden = form_fields(page, "form.quiz-form")
    again = client.post(action, data={**hidden, "topics": "traces", "difficulty": "any"},
                        follow_redirects=False)
    assert again.status_code == 303
