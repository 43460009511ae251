"""Class pages: the instructor's classes, a class page (completion, mastery, who is behind), its
assignments and CSV of scores; the join page, and a member's own page of the class.

An instructor reaches only their own classes (another's is a 404); a learner account only the
classes it is a member of. docs/classes.md has the rules.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response
from markupsafe import Markup, escape
from sqlalchemy.orm import Session
from starlette.datastructures import FormData

from app.accounts.models import User
from app.classes import service
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
    InstructorUser,
    LearnerUser,
    OptionalUser,
    SessionDep,
)
from app.errors import InvalidInput, NotFound
from app.mock import service as mock
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
        "assignments": service.class_assignments(db_session=db_session, class_id=classroom.id)})


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


# The class page's long tables are built here, not in the template: a class of 200 has 8,000
# heatmap cells and 1,600 completion cells, and Jinja's per-value escaping, attribute lookups
# and filters cost most of the page's time (docs/performance.md). What comes from users
# (usernames, titles) is escaped; the rest is numbers and a fixed set of words.


def _member_th(row: service.MemberRow, with_id: bool) -> str:
    name = escape(row.username)
    tag = f' <span class="hint">{escape(row.member.pseudonym)}</span>' if with_id else ""
    return f'<tr data-member="{escape(row.member.pseudonym)}"><th scope="row">{name}{tag}</th>'


# Every heatmap cell there can be, made once: by shade, then by percent. A level is the count
# of MASTERY_LEVELS' bounds a mastery reaches (service.mastery_level), worked out inline
# below for 8,000 cells rather than by a call each.
_HEAT_CELLS = [[f"<td class=m{lv}>{pct}</td>" for pct in range(101)]
               for lv in range(len(service.MASTERY_LEVELS) + 1)]


def heat_rows(report: service.ClassReport) -> Markup:
    """The mastery heatmap's rows: per member a cell per topic, shaded by level, its percent
    as text."""
    b1, b2, b3, b4 = service.MASTERY_LEVELS
    cells = _HEAT_CELLS
    level = service.mastery_level
    lines = []
    for row in report.members:
        values = row.mastery
        if not values or (min(values) >= 0.0 and max(values) <= 1.0):
            tds = "".join([cells[(v >= b1) + (v >= b2) + (v >= b3) + (v >= b4)][round(v * 100)]
                           for v in values])
        else:  # a mastery outside 0..1, were there one: formatted as it is
            tds = "".join([f"<td class=m{level(v)}>{round(v * 100)}</td>" for v in values])
        lines.append(_member_th(row, False) + tds + "</tr>")
    return Markup("\n".join(lines))


# A status as the completion table shows it: the badge, styled by the status.
_BADGES = {st: f'<span class="st st-{st.replace(" ", "-")}">{st}</span>' for st in (
    service.STATUS_NOT_OPEN, service.STATUS_NOT_STARTED, service.STATUS_IN_PROGRESS,
    service.STATUS_OVERDUE, service.STATUS_DONE, service.STATUS_LATE)}


def completion_rows(report: service.ClassReport) -> Markup:
    """The completion table's rows: per member and assignment the status and, once it means
    something, the score in percent."""
    opening = [(ar.assignment.id, ar.assignment, f'<td data-assignment="{ar.assignment.id}">')
               for ar in report.assignments]
    lines = []
    for row in report.members:
        cells = [_member_th(row, True)]
        work, statuses = row.work, row.statuses
        for aid, a, td in opening:
            w = work.get(aid)
            st = statuses.get(aid) or report.status(row, a)
            score = f" {round(w.score * 100)}%" if w and (w.done_at or not w.started) else ""
            cells.append(f"{td}{_BADGES[st]}{score}</td>")
        lines.append("".join(cells) + "</tr>")
    return Markup("\n".join(lines))


def behind_items(report: service.ClassReport) -> Markup:
    """Who is behind, as list items: most overdue first, the overdue assignments named."""
    # Each assignment's title escaped once, not once per member behind on it.
    titles = {ar.assignment.id: str(escape(ar.assignment.title)) for ar in report.assignments}
    lines = []
    for row in report.behind:
        pseudonym = escape(row.member.pseudonym)
        lines.append(f'<li data-member="{pseudonym}"><strong>{escape(row.username)}</strong> '
                     f"({pseudonym}): {len(row.overdue)} overdue — "
                     + ", ".join([titles.get(a.id) or str(escape(a.title)) for a in row.overdue])
                     + "</li>")
    return Markup("\n".join(lines))


@router.get("/classes/{class_id}")
def class_page(request: Request, class_id: int, db_session: SessionDep, user: InstructorUser,
               clock: ClockDep) -> Response:
    classroom = _own_class(db_session, class_id, user)
    report = service.class_report(db_session=db_session, classroom=classroom, now=clock.now())
    return _page(request, "class.html", {
        "user": user, "r": report, "join_url": _join_url(request, classroom),
        "heat_rows": heat_rows(report), "completion_rows": completion_rows(report),
        "behind": behind_items(report)})


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
    report = service.class_report(db_session=db_session, classroom=classroom, now=clock.now())
    return Response(service.scores_csv(report), media_type="text/csv; charset=utf-8",
                    headers={"Content-Disposition":
                             f'attachment; filename="class-{classroom.id}-scores.csv"'})


def _form_ctx(db_session: Session, now: datetime) -> dict[str, Any]:
    choices = service.question_choices(db_session=db_session)
    start = now.replace(second=0, microsecond=0)
    return {"kinds": KINDS, "topics": service.topic_titles(db_session=db_session),
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


def _spec(form: FormData) -> service.AssignmentSpec:
    kind = str(form.get("kind") or "")
    picked = "exercises" if kind == KIND_EXERCISES else "questions"
    slugs = [s for s in form.getlist(picked) if isinstance(s, str) and s]
    variants = {}
    for slug in slugs:
        raw = str(form.get(f"variant-{slug}") or "")
        if raw.isdigit():
            variants[slug] = int(raw)
    return service.AssignmentSpec(
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
        service.create_assignment(db_session=db_session, classroom=classroom, spec=_spec(form))
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
    a = service.get_assignment(db_session=db_session, classroom=classroom,
                               assignment_id=assignment_id)
    if a is None:
        raise NotFound("No such assignment.")
    return a


@router.get("/classes/{class_id}/assignments/{assignment_id}")
def assignment_page(request: Request, class_id: int, assignment_id: int, db_session: SessionDep,
                    user: InstructorUser, clock: ClockDep) -> Response:
    classroom = _own_class(db_session, class_id, user)
    a = _assignment(db_session, classroom, assignment_id)
    report = service.class_report(db_session=db_session, classroom=classroom, now=clock.now())
    return _page(request, "assignment.html", {
        "user": user, "classroom": classroom, "a": a, "r": report,
        "row": next(ar for ar in report.assignments if ar.assignment.id == a.id),
        "questions": service.assignment_questions(db_session=db_session, assignment=a)})


@router.post("/classes/{class_id}/assignments/{assignment_id}/delete")
def delete_assignment(class_id: int, assignment_id: int, db_session: SessionDep,
                      user: InstructorUser, _: CSRF) -> Response:
    classroom = _own_class(db_session, class_id, user)
    service.delete_assignment(db_session=db_session,
                              assignment=_assignment(db_session, classroom, assignment_id))
    return RedirectResponse(f"/classes/{class_id}", status_code=303)


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
    report = service.class_report(db_session=db_session, classroom=classroom, now=clock.now(),
                                  member_id=member.id)
    ids = [ar.assignment.id for ar in report.assignments]
    return _page(request, "member.html", {
        "user": user, "classroom": classroom, "member": member, "r": report,
        "row": report.members[0] if report.members else None,
        "instructor": service.instructor_name(db_session=db_session, classroom=classroom),
        "started": service.started_quizzes(db_session=db_session, learner_id=member.learner_id,
                                           assignment_ids=ids),
        "questions": {ar.assignment.id: service.assignment_questions(db_session=db_session,
                                                                     assignment=ar.assignment)
                      for ar in report.assignments if ar.assignment.kind != KIND_MOCK}})


@router.post("/classes/{class_id}/me/leave")
def leave(class_id: int, db_session: SessionDep, user: LearnerUser, _: CSRF) -> Response:
    _classroom, member = _membership(db_session, class_id, user)
    service.leave(db_session=db_session, member=member)
    return RedirectResponse("/account#classes", status_code=303)


@router.post("/classes/{class_id}/me/assignments/{assignment_id}/start")
def start_assignment(class_id: int, assignment_id: int, db_session: SessionDep, user: LearnerUser,
                     clock: ClockDep, _: CSRF) -> Response:
    classroom, member = _membership(db_session, class_id, user)
    a = _assignment(db_session, classroom, assignment_id)
    try:
        quiz = service.start(db_session=db_session, assignment=a, member=member, now=clock.now())
    except mock.NoQuestions:
        raise InvalidInput("There are no published questions to ask yet.") from None
    if a.kind == KIND_MOCK:
        return RedirectResponse(f"/mock/{quiz.id}", status_code=303)
    return RedirectResponse(f"/quizzes/{quiz.id}", status_code=303)
