"""Item-statistics pages for authors: the bank's table (sortable) at /author/stats and one
question's revisions and variants at /author/stats/{slug}. Every author sees the whole bank:
a question that is not theirs leads to its editor, where they propose an edit."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from app.authoring import service as authoring
from app.deps import AuthorUser, SessionDep, require_author
from app.errors import NotFound
from app.stats import service as stats
from app.templating import templates

router = APIRouter(prefix="/author/stats", include_in_schema=False,
                   dependencies=[Depends(require_author)])


@router.get("")
def bank_stats(request: Request, db_session: SessionDep, user: AuthorUser, sort: str = "question",
               order: str = "asc") -> Response:
    """Every revision (and variant) with first attempts, sortable by each column."""
    items = stats.item_stats(db_session=db_session)
    key = sort if sort in stats.SORT_KEYS else "question"
    items = stats.sort_items(items, key, descending=order == "desc")
    return templates.TemplateResponse(request, "stats/bank.html", {
        "user": user, "items": items, "sort": key, "order": "desc" if order == "desc" else "asc",
        "min_attempts": stats.MIN_ATTEMPTS, "flag_text": stats.FLAG_TEXT})


@router.get("/{slug}")
def question_stats(request: Request, slug: str, db_session: SessionDep, user: AuthorUser) -> Response:
    """One question's statistics per revision (and variant): choices, times, confidence."""
    question = authoring.get_question(db_session=db_session, slug=slug)
    if question is None:
        raise NotFound(f"No question called {slug!r}.")
    return templates.TemplateResponse(request, "stats/question.html", {
        "user": user, "question": question,
        "can_edit": authoring.can_edit(db_session=db_session, user=user, question=question),
        "items": stats.item_stats(db_session=db_session, question_id=question.id),
        "min_attempts": stats.MIN_ATTEMPTS, "flag_text": stats.FLAG_TEXT})
