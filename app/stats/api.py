"""The item-statistics API (/api/v1/stats), for authors: the same numbers as /author/stats."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends

from app.authoring import service as authoring
from app.deps import API_BUSY, AuthorUser, SessionDep, require_author
from app.errors import NotFound
from app.quizzes.models import CONFIDENCE_LEVELS
from app.stats import service as stats
from app.stats.schemas import ChoicePicksOut, ConfidenceOut, ItemOut

router = APIRouter(prefix="/api/v1/stats", tags=["stats"], responses=API_BUSY,
                   dependencies=[Depends(require_author)])

SortKey = Literal["question", "attempts", "facility", "discrimination", "median_ms", "flags"]


def _out(s: stats.ItemStats) -> ItemOut:
    levels = [*CONFIDENCE_LEVELS, "none"]
    return ItemOut(
        question=s.slug, title=s.title, topic=s.topic, revision_id=s.revision_id,
        revision=s.revision_number, variant=s.variant, attempts=s.attempts, facility=s.facility,
        discrimination=s.discrimination, rest_learners=s.rest_learners, median_ms=s.median_ms,
        choices=[ChoicePicksOut(key=c.key, text=c.text, correct=c.correct, picks=c.picks, share=c.share)
                 for c in s.choices],
        confidence=[ConfidenceOut(confidence=lv, right=s.confidence[lv][0], wrong=s.confidence[lv][1])
                    for lv in levels if lv in s.confidence],
        flags=s.flags)


@router.get("/items", response_model=list[ItemOut], responses={401: {}, 403: {}})
def bank_items(db_session: SessionDep, user: AuthorUser, sort: SortKey = "question",
               order: Literal["asc", "desc"] = "asc") -> list[ItemOut]:
    """Statistics of every revision (and variant) of the bank's questions, from each learner's
    first attempt; flagged items carry their reasons."""
    items = stats.item_stats(db_session=db_session)
    return [_out(s) for s in stats.sort_items(items, sort, descending=order == "desc")]


@router.get("/items/{slug}", response_model=list[ItemOut], responses={401: {}, 403: {}, 404: {}})
def question_items(slug: str, db_session: SessionDep, user: AuthorUser) -> list[ItemOut]:
    """One question's statistics per revision (and variant)."""
    question = authoring.get_question(db_session=db_session, slug=slug)
    if question is None:
        raise NotFound(f"No question called {slug!r}.")
    return [_out(s) for s in stats.item_stats(db_session=db_session, question_id=question.id)]
