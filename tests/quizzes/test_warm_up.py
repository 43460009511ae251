"""A newcomer's first question in a round is a warm-up: runnable, easy, from the round's core."""

from __future__ import annotations

import random
from collections.abc import Callable

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.questions.models import Question
from app.quizzes import service
from tests.factories import FIXTURE, form_fields, learner_id, parse, shown_slug, submit_answer


def _start_round(client: TestClient, round_slug: str) -> str:
    """Press a round's button on the home page, as a newcomer does; the first question's slug."""
    home = parse(client.get("/"))
    action, data = form_fields(home, "form.start-round")
    r = client.post(action, data={**data, "round": round_slug}, follow_redirects=True)
    assert r.status_code == 200, r.text
    return shown_slug(parse(r))


def test_every_newcomer_starts_the_round_on_a_runnable_easy_question(
    client: TestClient, new_client: Callable[..., TestClient], session_factory: sessionmaker[Session],
) -> None:
    firsts = []
    for _ in range(5):
        newcomer = new_client()
        firsts.append(_start_round(newcomer, "ddp"))
    with session_factory() as s:
        questions = {q.slug: q for q in s.scalars(select(Question))}
    for slug in firsts:
        q = questions[slug]
        assert q.has_snippet and q.difficulty <= 2 and q.topic == "basics", slug
    # In the fixture bank that is the one runnable difficulty-1 question.
    assert set(firsts) == {"fixture-single"}


def test_a_learner_who_practised_the_round_gets_no_warm_up(
    client: TestClient, settings: object, session_factory: sessionmaker[Session],
) -> None:
    submit_answer(client, "/questions/fixture-numeric", FIXTURE["fixture-numeric"]["right"], htmx=False)
    me = learner_id(client, settings)  # type: ignore[arg-type]
    with session_factory() as s:
        pool = list(s.scalars(select(Question).where(Question.topic == "basics")))
        assert service.warm_up(db_session=s, learner_id=me, topics=["basics"], groups=[["basics"]],
                               pool=pool, rng=random.Random(0)) is None
        # A newcomer to the same topics would get one; a round whose groups have no runnable
        # easy question gets none, and the quiz is drawn as before.
        first = service.warm_up(db_session=s, learner_id="someone-new", topics=["basics"],
                                groups=[["traces"], ["basics"]], pool=pool, rng=random.Random(0))
        assert first is not None and first.slug == "fixture-single"
        assert service.warm_up(db_session=s, learner_id="someone-new", topics=["basics"],
                               groups=[["traces"]], pool=pool, rng=random.Random(0)) is None
