"""The classes API (/api/v1), read-only: an instructor's classes and a class's report, and a
member's own view of a class. Classes are made and changed on their pages (CSRF-checked forms).

An instructor sees only their own classes (another's is a 404); a learner account only the
classes it is in, and in them only itself."""

from __future__ import annotations

from fastapi import APIRouter

from app.classes import class_page, grading, service
from app.classes.models import TalkMark
from app.classes.schemas import (
    AssignmentOut,
    ClassOut,
    ClassReportOut,
    MarkOut,
    MemberOut,
    MyClassOut,
    MyMarkOut,
    TalkAnswerOut,
    TopicOut,
    WorkOut,
)
from app.deps import API_BUSY, ClockDep, GraderUser, InstructorUser, LearnerUser, SessionDep
from app.errors import NotFound

router = APIRouter(prefix="/api/v1", tags=["classes"], responses=API_BUSY)


def _assignments(report: class_page.ClassReport) -> list[AssignmentOut]:
    return [AssignmentOut(id=ar.assignment.id, kind=ar.assignment.kind,
                          title=ar.assignment.title, opens_at=ar.assignment.opens_at,
                          due_at=ar.assignment.due_at, required=ar.assignment.required,
                          done=ar.done, late=ar.late) for ar in report.assignments]


def _work(report: class_page.ClassReport, row: class_page.MemberRow) -> list[WorkOut]:
    out = []
    for ar in report.assignments:
        w = row.work.get(ar.assignment.id)
        out.append(WorkOut(assignment_id=ar.assignment.id,
                           status=report.status(row, ar.assignment),
                           answered=w.answered if w else 0, score=w.score if w else 0.0,
                           done_at=w.done_at if w else None))
    return out


@router.get("/classes", response_model=list[ClassOut])
def list_classes(db_session: SessionDep, user: InstructorUser) -> list[ClassOut]:
    """Your classes (instructors only), newest first."""
    return [ClassOut(id=r.classroom.id, name=r.classroom.name, members=r.members,
                     assignments=r.assignments, created_at=r.classroom.created_at)
            for r in service.instructor_classes(db_session=db_session, instructor_id=user.id)]


@router.get("/classes/{class_id}", response_model=ClassReportOut, responses={404: {}})
def class_report(class_id: int, db_session: SessionDep, user: InstructorUser,
                 clock: ClockDep) -> ClassReportOut:
    """One of your classes: its assignments with completion, and each member's work, mastery
    per topic and overdue assignments."""
    classroom = service.get_own_class(db_session=db_session, class_id=class_id,
                                      instructor_id=user.id)
    if classroom is None:
        raise NotFound("No such class.")
    r = class_page.class_report(db_session=db_session, classroom=classroom, now=clock.now())
    return ClassReportOut(
        id=classroom.id, name=classroom.name, now=r.now, assignments=_assignments(r),
        topics=[TopicOut(slug=s, title=t) for s, t in r.topics],
        members=[MemberOut(class_id=m.member.pseudonym, username=m.username,
                           joined_at=m.member.joined_at, work=_work(r, m), mastery=m.mastery,
                           overdue=[a.id for a in m.overdue]) for m in r.members])


@router.get("/classes/{class_id}/me", response_model=MyClassOut, responses={404: {}})
def my_class(class_id: int, db_session: SessionDep, user: LearnerUser,
             clock: ClockDep) -> MyClassOut:
    """A class you are in (learner accounts): its assignments and your work on each."""
    member = service.membership(db_session=db_session, class_id=class_id, user_id=user.id)
    classroom = service.get_class(db_session=db_session, class_id=class_id) if member else None
    if member is None or classroom is None:
        raise NotFound("You are not in this class.")
    now = clock.now()
    r = class_page.class_report(db_session=db_session, classroom=classroom, now=now,
                                member_id=member.id)
    marks = grading.member_marks(db_session=db_session, classroom=classroom, member=member,
                                 now=now)
    return MyClassOut(id=classroom.id, name=classroom.name,
                      instructor=service.instructor_name(db_session=db_session, classroom=classroom),
                      class_id=member.pseudonym, joined_at=member.joined_at,
                      assignments=_assignments(r), work=_work(r, r.members[0]) if r.members else [],
                      marks=[MyMarkOut(assignment_id=t.assignment.id, question=t.question.slug,
                                       title=t.doc.title, rubric=list(t.doc.rubric),
                                       self_ticked=t.self_ticked, self_score=t.attempt.score,
                                       mark=_mark_out(t.mark)) for t in marks if t.mark])


def _mark_out(mark: TalkMark) -> MarkOut:
    return MarkOut(ticked=list(mark.ticked), score=mark.score, comment=mark.comment,
                   marked_at=mark.marked_at)


@router.get("/classes/{class_id}/talk-answers", response_model=list[TalkAnswerOut],
            responses={404: {}})
def talk_answers(class_id: int, db_session: SessionDep, user: GraderUser,
                 clock: ClockDep) -> list[TalkAnswerOut]:
    """Your class's talk-through answers to mark (the class's instructor, or an admin): each
    member's counted answer to the talk-throughs of its assignments, with your mark once given
    (those waiting first). Marks are given on the class's grading page."""
    classroom = service.graded_class(db_session=db_session, class_id=class_id, user=user)
    if classroom is None:
        raise NotFound("No such class.")
    return [TalkAnswerOut(
        attempt_id=t.attempt.id, assignment_id=t.assignment.id, class_id=t.member.pseudonym,
        username=t.username, question=t.question.slug, title=t.doc.title,
        variant=t.attempt.variant, text=t.text, rubric=list(t.doc.rubric),
        self_ticked=t.self_ticked, self_score=t.attempt.score,
        mark=_mark_out(t.mark) if t.mark else None)
        for t in grading.talk_answers(db_session=db_session, classroom=classroom,
                                      now=clock.now())]
