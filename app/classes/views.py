"""Class pages: the instructor's classes, a class page (completion, mastery, who is behind), its
assignments and CSV of scores; the join page, and a member's own page of the class.

An instructor reaches only their own classes (another's is a 404); a learner account only the
classes it is a member of. docs/classes.md has the rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from fastapi.responses import RedirectResponse, Response
from sqlalchemy.orm import Session
from starlette.datastructures import FormData

from app.accounts.models import User
from app.classes import assignments, class_page, grading, service
from app.classes.models import (
    KIND_EXERCISES,
    KIND_MOCK,
    KIND_QUIZ,
    KINDS,
    Assignment,
    ClassMember,
    Classroom,
)
from app.deps import (
    CSRF,
    ClockDep,
    CurrentLearner,
    FormDep,
    GraderUser,
    InstructorUser,
    LearnerUser,
    OptionalUser,
    SessionDep,
)
from app.errors import InvalidInput, NotFound
from app.mock import service as mock
from app.questions import service as questions_service
from app.templating import templates

router = APIRouter(include_in_schema=False)

# The form's date and time fields (datetime-local) carry no zone: they are read as UTC.
FORM_TIME = "%Y-%m-%dT%H:%M"
DEFAULT_DUE_DAYS = 7


def _page(request: Request, name: str, ctx: dict[str, Any], status: int = 200,
          **kw: Any) -> Response:
    return templates.TemplateResponse(request, f"classes/{name}", ctx, status_code=status, **kw)


def _own_class(db_session: Session, class_id: int, user: User) -> Classroom:
    classroom = service.get_own_class(db_session=db_session, class_id=class_id,
                                      instructor_id=user.id)
    if classroom is None:
        raise NotFound("No such class.")
    return classroom


def _join_url(request: Request, classroom: Classroom) -> str | None:
    if classroom.join_token is None:
        return None
    return str(request.url_for("join_page", token=classroom.join_token))


# The instructor's pages ---------------------------------------------------------------------


@router.get("/classes")
def classes_page(request: Request, db_session: SessionDep, user: InstructorUser) -> Response:
    return _page(request, "list.html", {
        "user": user, "rows": service.instructor_classes(db_session=db_session, instructor_id=user.id),
        "name": ""})


@router.post("/classes")
def create_class(request: Request, form: FormDep, db_session: SessionDep, user: InstructorUser,
                 _: CSRF) -> Response:
    name = str(form.get("name") or "")
    try:
        classroom = service.create_class(db_session=db_session, instructor=user, name=name)
    except service.ClassError as exc:
        return _page(request, "list.html", {
            "user": user, "rows": service.instructor_classes(db_session=db_session,
                                                             instructor_id=user.id),
            "name": name[:service.MAX_NAME], "error": exc.message}, status=422)
    return RedirectResponse(f"/classes/{classroom.id}", status_code=303)


@router.get("/classes/join/{token}", name="join_page")
def join_page(request: Request, token: str, db_session: SessionDep, user: OptionalUser) -> Response:
    """What joining means, before joining: what the instructor will see of the learner."""
    classroom = service.class_by_token(db_session=db_session, token=token)
    if classroom is None:
        raise NotFound("This join link does not work: the instructor may have replaced or "
                       "closed it.")
    member = None
    if user is not None and user.is_learner:
        member = service.membership(db_session=db_session, class_id=classroom.id, user_id=user.id)
    return _page(request, "join.html", {
        "user": user, "classroom": classroom, "token": token, "member": member,
        "instructor": service.instructor_name(db_session=db_session, classroom=classroom),
        "assignments": assignments.class_assignments(db_session=db_session, class_id=classroom.id)})


@router.post("/classes/join/{token}")
def join(token: str, db_session: SessionDep, user: LearnerUser, learner_id: CurrentLearner,
         clock: ClockDep, _: CSRF) -> Response:
    classroom = service.class_by_token(db_session=db_session, token=token)
    if classroom is None:
        raise NotFound("This join link does not work: the instructor may have replaced or "
                       "closed it.")
    service.join(db_session=db_session, classroom=classroom, user=user, learner_id=learner_id,
                 now=clock.now())
    return RedirectResponse(f"/classes/{classroom.id}/me", status_code=303)


@dataclass
class HeatRound:
    """One interview round of the heatmap: its topics, their columns of the report, and how
    many published questions each has."""

    slug: str
    title: str
    topics: list[tuple[str, str]]
    columns: list[int]
    counts: list[int]

    def mastery(self, row: class_page.MemberRow) -> float:
        """A member's mastery of the round: the mean over its published questions, as each
        topic's is over its own."""
        total = sum(self.counts)
        return (sum(row.mastery[i] * n for i, n in zip(self.columns, self.counts, strict=True))
                / total if total else 0.0)


def heat_rounds(report: class_page.ClassReport, rounds: list[Any]) -> list[HeatRound]:
    """The heatmap by interview round: the rounds with a topic of the report."""
    index = {slug: i for i, (slug, _title) in enumerate(report.topics)}
    out = []
    for r in rounds:
        columns = [(index[t.topic.slug], t.count) for t in r.topics if t.topic.slug in index]
        if columns:
            out.append(HeatRound(r.slug, r.title, [report.topics[i] for i, _n in columns],
                                 [i for i, _n in columns], [n for _i, n in columns]))
    return out


@router.get("/classes/{class_id}")
def class_page_view(request: Request, class_id: int, db_session: SessionDep,
                    user: InstructorUser, clock: ClockDep) -> Response:
    classroom = _own_class(db_session, class_id, user)
    report = class_page.class_report(db_session=db_session, classroom=classroom, now=clock.now())
    rounds = questions_service.topic_rounds(questions_service.topic_summaries(db_session=db_session))
    return _page(request, "class.html", {
        "user": user, "r": report, "join_url": _join_url(request, classroom),
        "heat_rounds": heat_rounds(report, rounds), "mastery_level": class_page.mastery_level})


@router.post("/classes/{class_id}/link")
def new_link(class_id: int, db_session: SessionDep, user: InstructorUser, _: CSRF) -> Response:
    classroom = _own_class(db_session, class_id, user)
    service.new_join_link(db_session=db_session, classroom=classroom)
    return RedirectResponse(f"/classes/{class_id}#join", status_code=303)


@router.post("/classes/{class_id}/link/revoke")
def revoke_link(class_id: int, db_session: SessionDep, user: InstructorUser, _: CSRF) -> Response:
    classroom = _own_class(db_session, class_id, user)
    service.revoke_join_link(db_session=db_session, classroom=classroom)
    return RedirectResponse(f"/classes/{class_id}#join", status_code=303)


@router.get("/classes/{class_id}/scores.csv")
def scores_csv(class_id: int, db_session: SessionDep, user: InstructorUser,
               clock: ClockDep) -> Response:
    classroom = _own_class(db_session, class_id, user)
    report = class_page.class_report(db_session=db_session, classroom=classroom, now=clock.now())
    return Response(class_page.scores_csv(report), media_type="text/csv; charset=utf-8",
                    headers={"Content-Disposition":
                             f'attachment; filename="class-{classroom.id}-scores.csv"'})


def _form_ctx(db_session: Session, now: datetime) -> dict[str, Any]:
    choices = assignments.question_choices(db_session=db_session)
    start = now.replace(second=0, microsecond=0)
    return {"kinds": KINDS, "topics": assignments.topic_titles(db_session=db_session, quizzable=True),
            "questions": [q for q in choices if q.type != "exercise"],
            "exercises": [q for q in choices if q.type == "exercise"],
            "mock_lo": mock.MIN_MINUTES, "mock_hi": mock.MAX_MINUTES,
            "mock_default": mock.DEFAULT_MINUTES,
            "values": {"kind": KIND_QUIZ, "title": "", "count": 5,
                       "opens_at": start.strftime(FORM_TIME),
                       "due_at": (start + timedelta(days=DEFAULT_DUE_DAYS)).strftime(FORM_TIME),
                       "topics": [], "questions": [], "variants": {}, "minutes": mock.DEFAULT_MINUTES}}


@router.get("/classes/{class_id}/assignments/new")
def new_assignment_page(request: Request, class_id: int, db_session: SessionDep,
                        user: InstructorUser, clock: ClockDep) -> Response:
    classroom = _own_class(db_session, class_id, user)
    return _page(request, "assignment_form.html", {
        "user": user, "classroom": classroom, **_form_ctx(db_session, clock.now())})


def _when(form: FormData, name: str) -> datetime:
    raw = str(form.get(name) or "")
    try:
        return datetime.strptime(raw[:16], FORM_TIME).replace(tzinfo=UTC)
    except ValueError:
        raise service.ClassError("Give the date and time as YYYY-MM-DDTHH:MM (UTC).",
                                 loc=(name,)) from None


def _number(form: FormData, name: str) -> int | None:
    raw = str(form.get(name) or "").strip()
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError:
        raise service.ClassError(f"{name} must be a whole number.", loc=(name,)) from None


def _spec(form: FormData) -> assignments.AssignmentSpec:
    kind = str(form.get("kind") or "")
    picked = "exercises" if kind == KIND_EXERCISES else "questions"
    slugs = [s for s in form.getlist(picked) if isinstance(s, str) and s]
    variants = {}
    for slug in slugs:
        raw = str(form.get(f"variant-{slug}") or "")
        if raw.isdigit():
            variants[slug] = int(raw)
    return assignments.AssignmentSpec(
        kind=kind, title=str(form.get("title") or ""), opens_at=_when(form, "opens_at"),
        due_at=_when(form, "due_at"),
        topics=[t for t in form.getlist("topics") if isinstance(t, str) and t] if kind == KIND_QUIZ else [],
        count=_number(form, "count"), slugs=slugs if kind != KIND_MOCK else [], variants=variants,
        minutes=_number(form, "minutes") if kind == KIND_MOCK else None)


@router.post("/classes/{class_id}/assignments")
def create_assignment(request: Request, class_id: int, form: FormDep, db_session: SessionDep,
                      user: InstructorUser, clock: ClockDep, _: CSRF) -> Response:
    classroom = _own_class(db_session, class_id, user)
    try:
        assignments.create_assignment(db_session=db_session, classroom=classroom, spec=_spec(form))
    except service.ClassError as exc:
        ctx = _form_ctx(db_session, clock.now())
        ctx["values"].update({
            "kind": str(form.get("kind") or KIND_QUIZ), "title": str(form.get("title") or ""),
            "opens_at": str(form.get("opens_at") or ""), "due_at": str(form.get("due_at") or ""),
            "count": str(form.get("count") or ""), "minutes": str(form.get("minutes") or ""),
            "topics": form.getlist("topics"),
            "questions": form.getlist("questions") + form.getlist("exercises"),
            "variants": {k.removeprefix("variant-"): str(v) for k, v in form.multi_items()
                         if k.startswith("variant-")}})
        return _page(request, "assignment_form.html", {
            "user": user, "classroom": classroom, **ctx, "error": exc.message,
            "error_field": exc.loc[0] if exc.loc else None}, status=422)
    return RedirectResponse(f"/classes/{class_id}", status_code=303)


def _assignment(db_session: Session, classroom: Classroom, assignment_id: int) -> Assignment:
    a = assignments.get_assignment(db_session=db_session, classroom=classroom,
                               assignment_id=assignment_id)
    if a is None:
        raise NotFound("No such assignment.")
    return a


@router.get("/classes/{class_id}/assignments/{assignment_id}")
def assignment_page(request: Request, class_id: int, assignment_id: int, db_session: SessionDep,
                    user: InstructorUser, clock: ClockDep) -> Response:
    classroom = _own_class(db_session, class_id, user)
    a = _assignment(db_session, classroom, assignment_id)
    report = class_page.class_report(db_session=db_session, classroom=classroom, now=clock.now())
    return _page(request, "assignment.html", {
        "user": user, "classroom": classroom, "a": a, "r": report,
        "row": next(ar for ar in report.assignments if ar.assignment.id == a.id),
        "questions": assignments.assignment_questions(db_session=db_session, assignment=a)})


@router.post("/classes/{class_id}/assignments/{assignment_id}/delete")
def delete_assignment(class_id: int, assignment_id: int, db_session: SessionDep,
                      user: InstructorUser, _: CSRF) -> Response:
    classroom = _own_class(db_session, class_id, user)
    assignments.delete_assignment(db_session=db_session,
                              assignment=_assignment(db_session, classroom, assignment_id))
    return RedirectResponse(f"/classes/{class_id}", status_code=303)


# Marking talk-throughs (app/classes/grading.py) ---------------------------------------------

# Ids are 32-bit on PostgreSQL; a larger one is no answer at all.
AttemptId = Annotated[int, Path(ge=1, le=2**31 - 1)]


def _graded_class(db_session: Session, class_id: int, user: User) -> Classroom:
    classroom = service.graded_class(db_session=db_session, class_id=class_id, user=user)
    if classroom is None:
        raise NotFound("No such class.")
    return classroom


@router.get("/classes/{class_id}/grading")
def grading_page(request: Request, class_id: int, db_session: SessionDep, user: GraderUser,
                 clock: ClockDep) -> Response:
    """The class's talk-through answers, those waiting for a mark first."""
    classroom = _graded_class(db_session, class_id, user)
    answers = grading.talk_answers(db_session=db_session, classroom=classroom, now=clock.now())
    return _page(request, "grading.html", {
        "user": user, "classroom": classroom, "answers": answers,
        "waiting": sum(1 for t in answers if t.mark is None)})


def _grade_page(request: Request, classroom: Classroom, answer: grading.TalkAnswer,
                user: User, db_session: Session, now: datetime, status: int = 200,
                **extra: Any) -> Response:
    waiting = grading.next_unmarked(db_session=db_session, classroom=classroom, now=now,
                                    after=answer.attempt.id)
    return _page(request, "grade.html", {
        "user": user, "classroom": classroom, "t": answer, "next_waiting": waiting,
        "max_comment": grading.MAX_COMMENT,
        "ticked": answer.mark.ticked if answer.mark is not None else [], **extra},
        status=status)


@router.get("/classes/{class_id}/grading/{attempt_id}")
def grade_page(request: Request, class_id: int, attempt_id: AttemptId, db_session: SessionDep,
               user: GraderUser, clock: ClockDep) -> Response:
    """One answer: what the member wrote beside the question's rubric, to tick and comment."""
    classroom = _graded_class(db_session, class_id, user)
    now = clock.now()
    answer = grading.talk_answer(db_session=db_session, classroom=classroom,
                                 attempt_id=attempt_id, now=now)
    if answer is None:
        raise NotFound("No such answer to mark in this class.")
    return _grade_page(request, classroom, answer, user, db_session, now)


@router.post("/classes/{class_id}/grading/{attempt_id}")
def grade(request: Request, class_id: int, attempt_id: AttemptId, form: FormDep,
          db_session: SessionDep, user: GraderUser, clock: ClockDep, _: CSRF) -> Response:
    """Save the mark (the moves ticked and a comment); "Save and next" opens the next answer
    waiting for one."""
    classroom = _graded_class(db_session, class_id, user)
    now = clock.now()
    answer = grading.talk_answer(db_session=db_session, classroom=classroom,
                                 attempt_id=attempt_id, now=now)
    if answer is None:
        raise NotFound("No such answer to mark in this class.")
    comment = str(form.get("comment") or "")
    raw = [v for v in form.getlist("ticked") if isinstance(v, str)]
    try:
        ticked = grading.read_ticks(raw, len(answer.doc.rubric))
        grading.mark(db_session=db_session, classroom=classroom, answer=answer, grader=user,
                     ticked=ticked, comment=comment, now=now)
    except service.ClassError as exc:
        return _grade_page(request, classroom, answer, user, db_session, now, status=422,
                           error=exc.message, error_field=exc.loc[0] if exc.loc else None,
                           comment=comment, ticked=[int(v) for v in raw if v.isdigit()])
    if form.get("then") == "next":
        following = grading.next_unmarked(db_session=db_session, classroom=classroom, now=now)
        if following is not None:
            return RedirectResponse(f"/classes/{class_id}/grading/{following.attempt.id}",
                                    status_code=303)
        return RedirectResponse(f"/classes/{class_id}/grading", status_code=303)
    return RedirectResponse(f"/classes/{class_id}/grading/{attempt_id}?saved=1", status_code=303)


# A member's pages ---------------------------------------------------------------------------


def _membership(db_session: Session, class_id: int, user: User) -> tuple[Classroom, ClassMember]:
    member = service.membership(db_session=db_session, class_id=class_id, user_id=user.id)
    classroom = service.get_class(db_session=db_session, class_id=class_id) if member else None
    if member is None or classroom is None:
        raise NotFound("You are not in this class.")
    return classroom, member


@router.get("/classes/{class_id}/me")
def member_page(request: Request, class_id: int, db_session: SessionDep, user: LearnerUser,
                clock: ClockDep) -> Response:
    classroom, member = _membership(db_session, class_id, user)
    report = class_page.class_report(db_session=db_session, classroom=classroom, now=clock.now(),
                                  member_id=member.id)
    ids = [ar.assignment.id for ar in report.assignments]
    marks = grading.member_marks(db_session=db_session, classroom=classroom, member=member,
                                 now=clock.now())
    return _page(request, "member.html", {
        "marks": marks,
        "user": user, "classroom": classroom, "member": member, "r": report,
        "row": report.members[0] if report.members else None,
        "instructor": service.instructor_name(db_session=db_session, classroom=classroom),
        "started": assignments.started_quizzes(db_session=db_session, learner_id=member.learner_id,
                                           assignment_ids=ids),
        "questions": {ar.assignment.id: assignments.assignment_questions(db_session=db_session,
                                                                     assignment=ar.assignment)
                      for ar in report.assignments if ar.assignment.kind != KIND_MOCK}})


@router.post("/classes/{class_id}/me/leave")
def leave(class_id: int, db_session: SessionDep, user: LearnerUser, clock: ClockDep,
          _: CSRF) -> Response:
    _classroom, member = _membership(db_session, class_id, user)
    service.leave(db_session=db_session, member=member, now=clock.now())
    return RedirectResponse("/account#classes", status_code=303)


@router.post("/classes/{class_id}/me/assignments/{assignment_id}/start")
def start_assignment(class_id: int, assignment_id: int, db_session: SessionDep, user: LearnerUser,
                     clock: ClockDep, _: CSRF) -> Response:
    classroom, member = _membership(db_session, class_id, user)
    a = _assignment(db_session, classroom, assignment_id)
    try:
        quiz = assignments.start(db_session=db_session, assignment=a, member=member, now=clock.now())
    except mock.NoQuestions:
        raise InvalidInput("There are no published questions to ask yet.") from None
    if a.kind == KIND_MOCK:
        return RedirectResponse(f"/mock/{quiz.id}", status_code=303)
    return RedirectResponse(f"/quizzes/{quiz.id}", status_code=303)
