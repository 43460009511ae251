"""Migration classes_0012 gives every existing card the rating of its newest review log, and
goes down and up again, on both databases."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from alembic import command
from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session

from app.accounts.models import Learner
from app.migrate import alembic_config, upgrade
from app.questions.models import STATUS_PUBLISHED, Question, Topic

T0 = datetime(2026, 11, 1, 12, tzinfo=UTC)


def test_existing_cards_take_the_rating_of_their_newest_log(fresh_url: str) -> None:
    upgrade(fresh_url, "classes_0011")
    engine = create_engine(fresh_url)
    try:
        # Only review_cards differs from the models at classes_0011: the rest goes in by the ORM.
        with Session(engine) as s, s.begin():
            s.add_all([Learner(id="l1"), Topic(slug="t", title="T")])
            s.flush()
            s.add_all([Question(id=qid, slug=f"q{qid}", status=STATUS_PUBLISHED, topic="t",
                                title="Q", difficulty=1, type="single") for qid in (1, 2, 3)])
        with engine.begin() as conn:
            for qid in (1, 2, 3):
                conn.execute(text("INSERT INTO review_cards (id, learner_id, question_id, card, "
                                  "due, reps, last_review) VALUES (:q, 'l1', :q, '{}', :t, 0, :t)"),
                             {"q": qid, "t": T0})
            # Card 1: Good then Again (newest is the miss); card 2: Again then Easy; card 3 none.
            for log_id, card, rating in ((10, 1, 3), (11, 2, 1), (12, 1, 1), (13, 2, 4)):
                conn.execute(text("INSERT INTO review_logs (id, card_id, learner_id, rating, "
                                  "reviewed_at, log) VALUES (:i, :c, 'l1', :r, :t, '{}')"),
                             {"i": log_id, "c": card, "r": rating,
                              "t": T0 + timedelta(minutes=log_id)})
        upgrade(fresh_url)
        with engine.connect() as conn:
            rows = dict(conn.execute(text("SELECT id, last_rating FROM review_cards")).all())
        assert rows == {1: 1, 2: 4, 3: None}
        command.downgrade(alembic_config(fresh_url), "classes_0011")
        upgrade(fresh_url)
        with engine.connect() as conn:
            assert dict(conn.execute(text("SELECT id, last_rating FROM review_cards")).all()) == rows
    finally:
        engine.dispose()
