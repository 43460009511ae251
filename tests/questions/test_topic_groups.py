"""A larger bank stays navigable: topic groups on the home page, filters by difficulty and format
on topic pages and in the quiz builder."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.questions.models import Question
from app.quizzes.models import QuizItem
from tests.factories import form_fields, parse, start_quiz, text


def test_home_lists_topics_under_their_group_headings_ungrouped_last(client: TestClient) -> None:
    page = parse(client.get("/"))
    topics = page.select_one("#topics-h").find_parent("section")
    headings = [text(h).split(" · ")[0] for h in topics.select("h3")]
    assert headings == ["Fixture basics", "More topics"]
    first, second = topics.select("table.topics")
    assert [a["href"] for a in first.select("a")] == ["/topics/basics"]
    assert [a["href"] for a in second.select("a")] == ["/topics/traces"]
    legends = [text(lg) for lg in page.select("form.quiz-form fieldset.topic-group > legend")]
    assert legends == ["Fixture basics", "More topics"]


def test_topic_page_filters_by_difficulty_and_format(client: TestClient) -> None:
    listed = lambda url: [a["href"] for a in parse(client.get(url)).select(".question-list a")]  # noqa: E731
    assert len(listed("/topics/basics")) == 3
    assert listed("/topics/basics?difficulty=2") == ["/questions/fixture-multi"]
    assert listed("/topics/basics?types=numeric&types=single") == [
        "/questions/fixture-single", "/questions/fixture-numeric"]
    page = parse(client.get("/topics/basics?difficulty=1&types=multi"))
    assert not page.select(".question-list a")
    assert "No question of this topic matches" in text(page)
    assert page.select_one('input[name=types][value=multi]').has_attr("checked")
    # Unknown filter values are no filter, not an error page.
    assert len(listed("/topics/basics?difficulty=any&types=essay")) == 3


def test_a_quiz_of_one_format_holds_only_that_format(
    client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    start_quiz(client, count="10", types=["trace"])
    with session_factory() as s:
        types = s.scalars(select(Question.type).join(QuizItem, QuizItem.question_id == Question.id))
        assert sorted(types) == ["trace", "trace"]


def test_an_unknown_format_is_refused_by_name(client: TestClient) -> None:
    action, hidden = form_fields(parse(client.get("/")), "form.quiz-form")
    response = client.post(action, data={**hidden, "types": "essay"}, follow_redirects=False)
    assert response.status_code == 422 and "essay" in response.text
