"""A learner's mastery of each topic: what the dashboard, today's panel, the home page and a
mock interview's pick read (app/review/service.py holds the per-question definition).

A topic's mastery is the mean over its published questions of each question's mastery
(CardState.mastery: FSRS's predicted recall if the last review recalled it, else 0);
unseen questions count 0.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.questions.models import STATUS_PUBLISHED, Question, Topic
from app.review.service import card_states


@dataclass
class TopicMastery:
    slug: str
    title: str
    questions: int
    seen: int
    recall: float  # mean predicted recall over the topic's questions, unseen as 0


def published_topics(db_session: Session) -> tuple[dict[int, str], list[Topic]]:
    """The published questions' topics by id, and those topics in their listed order."""
    qs = dict(db_session.execute(select(Question.id, Question.topic)
                                 .where(Question.status == STATUS_PUBLISHED)).all())
    topics = list(db_session.scalars(select(Topic).where(Topic.slug.in_(set(qs.values())))
                                     .order_by(Topic.position, Topic.title)))
    return qs, topics


def topic_mastery(topics: list[Topic], questions: dict[int, str],
                  recall: dict[int, float]) -> list[TopicMastery]:
    """Per topic, the mean of `recall` (each question's mastery) with unseen questions as 0."""
    by_topic: dict[str, list[int]] = defaultdict(list)
    for qid, topic in questions.items():
        by_topic[topic].append(qid)
    out = []
    for t in topics:
        ids = by_topic.get(t.slug, [])
        if not ids:
            continue
        out.append(TopicMastery(t.slug, t.title, len(ids), sum(1 for q in ids if q in recall),
                                sum(recall.get(q, 0.0) for q in ids) / len(ids)))
    return out


def mastery_by_topic(*, db_session: Session, learner_id: str, now: datetime) -> dict[str, float]:
    """Each topic's mastery now (the one definition; unseen questions count 0)."""
    questions, topics = published_topics(db_session)
    live = [c for c in card_states(db_session=db_session, learner_id=learner_id)
            if c.question_id in questions]
    return {m.slug: m.recall for m in
            topic_mastery(topics, questions, {c.question_id: c.mastery(now) for c in live})}
