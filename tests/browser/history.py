"""A learner with six weeks of practice on the real bank (about 60% of it seen, some topics
better than others), for the pages whose size depends on a history: the dashboard, today's
panel, the plan. Shared by the browser tests and scripts/measure_pages.py."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from sqlalchemy import select

from app.db import make_engine, make_sessionmaker, session_scope
from app.questions.models import Question
from app.questions.service import published_question
from app.quizzes import service
from app.quizzes.grading import correct_answer
from app.settings import Settings


def practise(settings: Settings, learner: str, now: datetime, *, share: float = 0.6,
             seed: int = 3) -> int:
    """Answer `share` of the bank's plain questions one to three times each over the six
    weeks before `now`; returns how many answers were stored."""
    rng = random.Random(seed)
    engine = make_engine(settings.resolved_database_url)
    stored = 0
    with session_scope(make_sessionmaker(engine)) as s:
        slugs = list(s.scalars(select(Question.slug).where(Question.status == "published",
                                                           Question.type != "exercise")))
        rng.shuffle(slugs)
        for slug in slugs[: int(len(slugs) * share)]:
            q = published_question(db_session=s, slug=slug)
            assert q is not None
            # Cases and talk-throughs are answered in steps, exercises by code.
            if q.doc.type not in ("single", "multi", "numeric", "trace"):
                continue
            for _ in range(rng.randint(1, 3)):
                # The variant the server draws for this learner now (another is refused).
                variant = service.drawn_variant(db_session=s, learner_id=learner, question_id=q.id,
                                                count=q.doc.variant_count)
                doc = q.variant(variant)
                key = correct_answer(doc)
                at = now - timedelta(days=rng.uniform(0, 42))
                right = rng.random() < (0.85 if q.topic < "j" else 0.5)
                if right:
                    raw = key
                elif doc.effective_format == "numeric":
                    raw = str(float(key) + 7)
                elif doc.effective_format == "multi":
                    raw = [c.key for c in doc.choices if not c.correct][:1]
                else:
                    raw = next((c.key for c in doc.choices if not c.correct), key)
                service.answer_question(db_session=s, learner_id=learner, question=q,
                                        raw_answer=raw, variant=variant, token=None,
                                        time_taken_ms=rng.randint(8000, 90000),
                                        confidence=rng.choice(["sure", "unsure", "guessing", None]),
                                        now=at)
                stored += 1
    engine.dispose()
    return stored
