"""Classes: an instructor's class and its join link, members joining and leaving, and what a
deleted account takes with it. Assignments are assignments.py, the class page's numbers
report.py; docs/classes.md says what an instructor sees and why.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    delete,
    func,
    select,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.accounts.models import User
from app.accounts.service import ensure_learner
from app.classes.models import (
    Assignment,
    AssignmentStart,
    ClassMember,
    Classroom,
)
from app.errors import InvalidInput

MAX_NAME = 120


class ClassError(InvalidInput):
    """A class or assignment that cannot be made as asked (the message says which field)."""


# Classes and their join link ---------------------------------------------------------------


def _token() -> str:
    return secrets.token_urlsafe(24)


def create_class(*, db_session: Session, instructor: User, name: str) -> Classroom:
    """A new class of this instructor's, with a live join link."""
    name = " ".join(name.split())
    if not name:
        raise ClassError("Give the class a name.", loc=("name",))
    if len(name) > MAX_NAME:
        raise ClassError(f"A class name has at most {MAX_NAME} characters.", loc=("name",))
    classroom = Classroom(name=name, instructor_id=instructor.id, join_token=_token())
    db_session.add(classroom)
    db_session.flush()
    return classroom


def get_own_class(*, db_session: Session, class_id: int, instructor_id: int) -> Classroom | None:
    """The instructor's own class; another instructor's does not exist for them."""
    classroom = db_session.get(Classroom, class_id)
    if classroom is None or classroom.instructor_id != instructor_id:
        return None
    return classroom


@dataclass
class ClassRow:
    classroom: Classroom
    members: int
    assignments: int


def instructor_classes(*, db_session: Session, instructor_id: int) -> list[ClassRow]:
    """The instructor's classes, newest first, with their member and assignment counts."""
    members = (select(func.count()).select_from(ClassMember)
               .where(ClassMember.class_id == Classroom.id, ClassMember.left_at.is_(None))
               .scalar_subquery())
    assignments = (select(func.count()).select_from(Assignment)
                   .where(Assignment.class_id == Classroom.id).scalar_subquery())
    rows = db_session.execute(select(Classroom, members, assignments)
                              .where(Classroom.instructor_id == instructor_id)
                              .order_by(Classroom.created_at.desc(), Classroom.id.desc()))
    return [ClassRow(c, int(m), int(a)) for c, m, a in rows]


def new_join_link(*, db_session: Session, classroom: Classroom) -> str:
    """A new unguessable join token; the old link stops working."""
    classroom.join_token = _token()
    db_session.flush()
    return classroom.join_token


def revoke_join_link(*, db_session: Session, classroom: Classroom) -> None:
    """Close the class to newcomers: the join link becomes a 404 (members stay)."""
    classroom.join_token = None
    db_session.flush()


def class_by_token(*, db_session: Session, token: str) -> Classroom | None:
    """The class whose live join link carries `token`; a revoked or made-up one is None."""
    if not token or len(token) > 64:
        return None
    return db_session.scalar(select(Classroom).where(Classroom.join_token == token))


def instructor_name(*, db_session: Session, classroom: Classroom) -> str:
    """The username of the class's instructor."""
    return db_session.scalar(select(User.username).where(User.id == classroom.instructor_id)) or ""


# Members ----------------------------------------------------------------------------------


def graded_class(*, db_session: Session, class_id: int, user: User) -> Classroom | None:
    """The class whose answers this user may mark: an admin any, an instructor their own."""
    if user.is_admin:
        return get_class(db_session=db_session, class_id=class_id)
    return get_own_class(db_session=db_session, class_id=class_id, instructor_id=user.id)


def get_class(*, db_session: Session, class_id: int) -> Classroom | None:
    """The class with this id (callers check who may see it)."""
    return db_session.get(Classroom, class_id)


def membership(*, db_session: Session, class_id: int, user_id: int,
               with_left: bool = False) -> ClassMember | None:
    """The account's membership of the class, if it is a member (or, `with_left`, was one)."""
    stmt = select(ClassMember).where(ClassMember.class_id == class_id,
                                     ClassMember.user_id == user_id)
    if not with_left:
        stmt = stmt.where(ClassMember.left_at.is_(None))
    return db_session.scalar(stmt)


def _pseudonym(db_session: Session, class_id: int) -> str:
    taken = set(db_session.scalars(select(ClassMember.pseudonym)
                                   .where(ClassMember.class_id == class_id)))
    while True:
        # 40 random bits, so pseudonyms of one class collide rarely (and are retried).
        candidate = f"L-{secrets.token_hex(5).upper()}"
        if candidate not in taken:
            return candidate


def join(*, db_session: Session, classroom: Classroom, user: User, learner_id: str,
         now: datetime) -> ClassMember:
    """Make the learner account a member of the class (a member already stays as they are; one
    who left is restored: the same class id, joining time and work)."""
    existing = membership(db_session=db_session, class_id=classroom.id, user_id=user.id,
                          with_left=True)
    if existing is not None:
        if existing.left_at is not None:
            existing.left_at = None
            db_session.flush()
        return existing
    ensure_learner(db_session=db_session, learner_id=learner_id)
    member = ClassMember(class_id=classroom.id, user_id=user.id, learner_id=learner_id,
                         pseudonym=_pseudonym(db_session, classroom.id), joined_at=now)
    try:
        # A double-clicked Join: the unique (class, account) keeps one membership.
        with db_session.begin_nested():
            db_session.add(member)
            db_session.flush()
    except IntegrityError:
        existing = membership(db_session=db_session, class_id=classroom.id, user_id=user.id)
        if existing is None:
            raise
        return existing
    return member


def leave(*, db_session: Session, member: ClassMember, now: datetime) -> None:
    """Take the member out of the class: the instructor sees nothing of them from now on. The
    membership and its work are kept: a return through the join link restores them, so
    leaving never resets a grade."""
    member.left_at = now
    db_session.flush()


@dataclass
class Membership:
    member: ClassMember
    classroom: Classroom
    instructor: str


def learner_classes(*, db_session: Session, user_id: int,
                    with_left: bool = False) -> list[Membership]:
    """The classes the account is a member of (`with_left`: or left), with their instructors'
    usernames."""
    where = [ClassMember.user_id == user_id]
    if not with_left:
        where.append(ClassMember.left_at.is_(None))
    rows = db_session.execute(
        select(ClassMember, Classroom, User.username)
        .join(Classroom, Classroom.id == ClassMember.class_id)
        .join(User, User.id == Classroom.instructor_id)
        .where(*where).order_by(ClassMember.joined_at, ClassMember.id))
    return [Membership(m, c, name) for m, c, name in rows]


# Privacy ----------------------------------------------------------------------------------


def export_memberships(*, db_session: Session, user_id: int) -> list[dict[str, Any]]:
    """The account's class memberships, for its data download."""
    return [{"class": m.classroom.name, "instructor": m.instructor, "class_id": m.member.pseudonym,
             "joined_at": m.member.joined_at.isoformat(),
             "left_at": m.member.left_at.isoformat() if m.member.left_at else None}
            for m in learner_classes(db_session=db_session, user_id=user_id, with_left=True)]


def forget_learner(*, db_session: Session, user_id: int, learner_ids: list[str]) -> int:
    """Take a deleted account out of every class; how many memberships it had."""
    if learner_ids:
        db_session.execute(delete(AssignmentStart).where(AssignmentStart.learner_id.in_(learner_ids)))
    gone = db_session.scalars(select(ClassMember.id).where(ClassMember.user_id == user_id)).all()
    db_session.execute(delete(ClassMember).where(ClassMember.user_id == user_id))
    return len(gone)

