"""Accounts, the audit log, drafts and revisions, the publish gate, and bank uploads.

Editing never changes what learners see: every save appends an immutable
revision and points `Question.draft_revision_id` at it; only `publish` moves
`current_revision_id` (what learners see) to the draft, and only when every
audited knob combination of the draft has a finished run on the current torch
whose expectations all pass.
"""

from __future__ import annotations

import difflib
import re
import tempfile
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from app.authoring import bankfiles, security
from app.authoring.models import ROLE_ADMIN, ROLES, AuditEntry, BankUpload, LoginAttempt, User
from app.authoring.security import burn_verify, hash_password
from app.db import utcnow
from app.questions.bank import Bank, content_hash, dump_question_yaml, load_bank
from app.questions.models import (
    STATUS_DRAFT,
    STATUS_PUBLISHED,
    STATUS_RETIRED,
    Question,
    QuestionRevision,
    Topic,
)
from app.questions.schema import QuestionDoc, TopicDoc
from app.questions.service import (
    ImportReport,
    append_revision,
    export_bank,
    import_bank,
    make_current,
    revision_doc,
    upsert_topic,
)
from app.verify import service as verify_service
from app.verify.expectations import CheckResult, evaluate
from app.verify.models import RUN_DONE, RUN_FAILED, RUN_QUEUED, RUN_RUNNING, Run, Verdict

USERNAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")
# Long enough that guessing within the login rate limit is hopeless.
MIN_PASSWORD_LENGTH = 10
# Failed logins are counted over this window (settings.login_attempts_per_minute).
LOGIN_WINDOW_SECONDS = 60
# Failed-login rows older than this are deleted on the next login.
LOGIN_ATTEMPT_RETENTION = timedelta(hours=1)
# An upload not confirmed within this time is deleted.
UPLOAD_RETENTION = timedelta(hours=1)

SOURCE_EDITOR = "editor"
SOURCE_REVERT = "revert"
SOURCE_OVERRIDE = "override"


class AccountError(ValueError):
    """A username, password or role that cannot be used."""


class NotAllowed(PermissionError):
    """The user may not do this to this question."""


class Conflict(ValueError):
    """Someone saved a newer revision since this editor was opened."""


class PublishRefused(ValueError):
    """The publish gate is closed; `gate` says why."""

    def __init__(self, message: str, gate: Gate | None = None) -> None:
        super().__init__(message)
        self.gate = gate


# Audit log --------------------------------------------------------------------------------


def audit(
    *, db_session: Session, user: User | None, action: str, target: str = "",
    detail: dict[str, Any] | None = None, actor: str | None = None,
) -> AuditEntry:
    """Record who did what to what."""
    entry = AuditEntry(user_id=user.id if user else None,
                       actor=(actor if actor is not None else (user.username if user else "-"))[:64],
                       action=action, target=target[:200], detail=detail or {})
    db_session.add(entry)
    db_session.flush()
    return entry


def list_audit(
    *, db_session: Session, actor: str | None = None, action: str | None = None, limit: int = 200
) -> list[AuditEntry]:
    """The newest audit entries, optionally for one actor or action prefix."""
    stmt = select(AuditEntry).order_by(AuditEntry.created_at.desc(), AuditEntry.id.desc())
    if actor:
        stmt = stmt.where(AuditEntry.actor == actor)
    if action:
        stmt = stmt.where(AuditEntry.action.startswith(action))
    return list(db_session.scalars(stmt.limit(limit)))


# Accounts ---------------------------------------------------------------------------------


def check_password(password: str) -> None:
    if len(password) < MIN_PASSWORD_LENGTH:
        raise AccountError(f"a password needs at least {MIN_PASSWORD_LENGTH} characters")


def create_user(*, db_session: Session, username: str, password: str, role: str) -> User:
    """A new active account; raises AccountError for a bad or taken name, role or password."""
    if not USERNAME_RE.match(username):
        raise AccountError("a username is 1–64 letters, digits and . _ @ -, starting with a letter or digit")
    if role not in ROLES:
        raise AccountError(f"role must be one of {', '.join(ROLES)}")
    check_password(password)
    if get_user_by_name(db_session=db_session, username=username) is not None:
        raise AccountError(f"the username {username!r} is taken")
    user = User(username=username, password_hash=hash_password(password), role=role, active=True)
    db_session.add(user)
    db_session.flush()
    return user


def get_user(*, db_session: Session, user_id: int) -> User | None:
    """The account with this id."""
    return db_session.get(User, user_id)


def get_user_by_name(*, db_session: Session, username: str) -> User | None:
    """The account with this username (case-insensitive)."""
    return db_session.scalar(select(User).where(func.lower(User.username) == username.lower()))


def list_users(*, db_session: Session) -> list[User]:
    """Every account, by name."""
    return list(db_session.scalars(select(User).order_by(User.username)))


def update_user(
    *, db_session: Session, user: User, role: str | None = None, active: bool | None = None,
    password: str | None = None,
) -> list[str]:
    """Change an account; any change signs it out everywhere. Returns what changed."""
    changed = []
    if role is not None and role != user.role:
        if role not in ROLES:
            raise AccountError(f"role must be one of {', '.join(ROLES)}")
        user.role = role
        changed.append(f"role={role}")
    if active is not None and active != user.active:
        user.active = active
        changed.append(f"active={active}")
    if password:
        check_password(password)
        user.password_hash = hash_password(password)
        changed.append("password")
    if changed:
        user.session_version += 1
        db_session.flush()
    return changed


def sign_out_everywhere(*, db_session: Session, user: User) -> None:
    """Invalidate every session cookie issued to this user."""
    user.session_version += 1
    db_session.flush()


@dataclass
class LoginResult:
    user: User | None
    limited: bool = False


def failed_logins(*, db_session: Session, username: str, client_ip: str, seconds: float) -> int:
    """Failed sign-ins for this username from this address in the last `seconds`."""
    since = utcnow() - timedelta(seconds=seconds)
    return int(db_session.scalar(
        select(func.count()).select_from(LoginAttempt).where(
            LoginAttempt.username == username.lower()[:64], LoginAttempt.client_ip == client_ip[:64],
            LoginAttempt.created_at >= since)
    ) or 0)


def authenticate(
    *, db_session: Session, username: str, password: str, client_ip: str, limit: int
) -> LoginResult:
    """The active user these credentials name, or None; `limited` once the rate limit is hit.

    The limit counts failures per (username, client address) in the database, so it
    holds across web processes. Every attempt is first recorded as a failure, in a
    short transaction in which attempts for one pair take turns (SQLite: the write
    lock; PostgreSQL: a transaction-scoped advisory lock), so a burst of concurrent
    guesses cannot all read the count before any is recorded. That transaction is
    committed here, before the password hash is checked: the check takes a tenth of
    a second of CPU, and on SQLite no other request could write meanwhile. A correct
    password then removes its record in the request's next transaction.
    """
    if db_session.get_bind().dialect.name == "postgresql":
        pair = f"login:{username.lower()[:64]}:{client_ip[:64]}"
        db_session.execute(select(func.pg_advisory_xact_lock(func.hashtext(pair))))
    db_session.execute(
        delete(LoginAttempt).where(LoginAttempt.created_at < utcnow() - LOGIN_ATTEMPT_RETENTION)
    )
    if failed_logins(db_session=db_session, username=username, client_ip=client_ip,
                     seconds=LOGIN_WINDOW_SECONDS) >= limit:
        return LoginResult(None, limited=True)
    attempt = LoginAttempt(username=username.lower()[:64], client_ip=client_ip[:64])
    db_session.add(attempt)
    user = get_user_by_name(db_session=db_session, username=username)
    db_session.commit()
    ok = False
    if user is None or not user.active:
        burn_verify(password)
    else:
        try:
            ok, new_hash = security.password_hasher.verify_and_update(password, user.password_hash)
        except Exception:  # a corrupt stored hash is a failed login
            ok, new_hash = False, None
        if ok and new_hash:
            user.password_hash = new_hash
    if not ok:
        return LoginResult(None)
    db_session.delete(attempt)
    db_session.flush()
    return LoginResult(user)


# Questions and revisions -----------------------------------------------------------------


def get_question(*, db_session: Session, slug: str, for_update: bool = False) -> Question | None:
    """The question with this slug, whatever its status (locked for a write if asked)."""
    stmt = select(Question).where(Question.slug == slug)
    if for_update:
        stmt = stmt.with_for_update(of=Question)
    return db_session.scalar(stmt)


def owner_id(*, db_session: Session, question: Question) -> int | None:
    """Who wrote the question's first revision; None for imported questions."""
    return db_session.scalar(
        select(QuestionRevision.author_id).where(QuestionRevision.question_id == question.id,
                                                 QuestionRevision.number == 1)
    )


def can_edit(*, db_session: Session, user: User, question: Question) -> bool:
    """Admins edit everything; an author edits the questions they created."""
    return user.role == ROLE_ADMIN or owner_id(db_session=db_session, question=question) == user.id


def require_edit(*, db_session: Session, user: User, question: Question) -> None:
    if not can_edit(db_session=db_session, user=user, question=question):
        raise NotAllowed("Only the question's author or an admin may change it.")


def editing_revision(*, db_session: Session, question: Question) -> QuestionRevision:
    """The revision the editor starts from: the unpublished draft, else the current one."""
    rev_id = question.draft_revision_id or question.current_revision_id
    rev = db_session.get(QuestionRevision, rev_id) if rev_id is not None else None
    if rev is None:
        raise LookupError(f"question {question.slug!r} has no revision")
    return rev


def list_revisions(*, db_session: Session, question: Question) -> list[QuestionRevision]:
    """Every revision of a question, newest first."""
    return list(db_session.scalars(
        select(QuestionRevision).where(QuestionRevision.question_id == question.id)
        .order_by(QuestionRevision.number.desc())
    ))


def get_revision(*, db_session: Session, question: Question, number: int) -> QuestionRevision | None:
    """Revision `number` of a question."""
    return db_session.scalar(
        select(QuestionRevision).where(QuestionRevision.question_id == question.id,
                                       QuestionRevision.number == number)
    )


def _ensure_topic(db_session: Session, slug: str) -> None:
    if db_session.get(Topic, slug) is None:
        upsert_topic(db_session=db_session, slug=slug,
                     topic=TopicDoc(title=slug.replace("-", " ").capitalize()))


def _append_revision(
    db_session: Session, question: Question, doc: QuestionDoc, *, source: str,
    user: User | None, note: str,
) -> QuestionRevision:
    return append_revision(db_session=db_session, question=question, doc=doc, source=source,
                           author_id=user.id if user else None, note=note)


def _make_draft(db_session: Session, question: Question, rev: QuestionRevision, doc: QuestionDoc) -> None:
    _ensure_topic(db_session, doc.topic)
    question.draft_revision_id = rev.id
    if question.status != STATUS_PUBLISHED:
        # Nobody but authors sees an unpublished question, so its list fields and
        # its exported content follow the draft.
        make_current(question=question, revision=rev, doc=doc)
    db_session.flush()


def create_question(*, db_session: Session, doc: QuestionDoc, user: User, note: str = "") -> Question:
    """A new draft question whose first revision is doc; raises Conflict if the slug is taken."""
    if get_question(db_session=db_session, slug=doc.slug) is not None:
        raise Conflict(f"a question with the slug {doc.slug!r} already exists")
    _ensure_topic(db_session, doc.topic)
    question = Question(slug=doc.slug, status=STATUS_DRAFT, topic=doc.topic, title=doc.title,
                        difficulty=doc.difficulty, type=doc.type, tags=list(doc.tags),
                        has_snippet=doc.verify is not None)
    db_session.add(question)
    db_session.flush()
    rev = _append_revision(db_session, question, doc, source=SOURCE_EDITOR, user=user, note=note)
    _make_draft(db_session, question, rev, doc)
    audit(db_session=db_session, user=user, action="question.create", target=doc.slug,
          detail={"revision": rev.number})
    return question


def save_draft(
    *, db_session: Session, question: Question, doc: QuestionDoc, user: User, note: str = "",
    base_revision_id: int | None = None,
) -> QuestionRevision | None:
    """Append doc as a new revision and make it the draft; None when nothing changed.

    `base_revision_id` is the revision the editor was opened on; a newer one means
    someone else saved in between (Conflict) rather than silently losing their edit.
    """
    require_edit(db_session=db_session, user=user, question=question)
    if doc.slug != question.slug:
        raise Conflict("the slug of an existing question cannot change")
    base = editing_revision(db_session=db_session, question=question)
    if base_revision_id is not None and base_revision_id != base.id:
        raise Conflict(f"revision {base.number} was saved after you opened the editor; "
                       "reload to see it, then make your change again")
    if base.content_hash == content_hash(doc):
        return None
    rev = _append_revision(db_session, question, doc, source=SOURCE_EDITOR, user=user, note=note)
    _make_draft(db_session, question, rev, doc)
    audit(db_session=db_session, user=user, action="question.save", target=question.slug,
          detail={"revision": rev.number, "note": note})
    return rev


def revert(*, db_session: Session, question: Question, number: int, user: User) -> QuestionRevision:
    """A new draft revision whose content equals revision `number`."""
    require_edit(db_session=db_session, user=user, question=question)
    old = get_revision(db_session=db_session, question=question, number=number)
    if old is None:
        raise LookupError(f"{question.slug!r} has no revision {number}")
    doc = revision_doc(old)
    rev = _append_revision(db_session, question, doc, source=SOURCE_REVERT, user=user,
                           note=f"Revert to revision {number}")
    _make_draft(db_session, question, rev, doc)
    audit(db_session=db_session, user=user, action="question.revert", target=question.slug,
          detail={"revision": rev.number, "to": number})
    return rev


def revision_text(rev: QuestionRevision) -> str:
    """What a diff compares: the question as bank YAML, then its snippet."""
    doc = revision_doc(rev)
    text = dump_question_yaml(doc)
    if doc.verify is not None and rev.snippet_text is not None:
        text += f"\n# ---- {doc.verify.snippet} ----\n{rev.snippet_text}"
    return text


def diff_revisions(a: QuestionRevision, b: QuestionRevision) -> list[str]:
    """A unified diff from revision a to revision b (lines without newlines)."""
    return list(difflib.unified_diff(
        revision_text(a).splitlines(), revision_text(b).splitlines(),
        fromfile=f"revision {a.number}", tofile=f"revision {b.number}", lineterm="", n=3,
    ))


def retire(*, db_session: Session, question: Question, user: User) -> None:
    """Hide a question from learners (their past attempts stay)."""
    require_edit(db_session=db_session, user=user, question=question)
    question.status = STATUS_RETIRED
    db_session.flush()
    audit(db_session=db_session, user=user, action="question.retire", target=question.slug)


# The publish gate -------------------------------------------------------------------------


@dataclass
class ComboGate:
    params: dict[str, Any]
    world_size: int
    run: Run | None
    checks: list[CheckResult] = field(default_factory=list)

    @property
    def state(self) -> str:
        if self.run is None:
            return "not run"
        if self.run.status in (RUN_QUEUED, RUN_RUNNING):
            return self.run.status
        if self.run.status == RUN_FAILED:
            return "infrastructure failure"
        if not self.checks:
            return "no expectation applies"
        return "passed" if self.passed else "failed"

    @property
    def passed(self) -> bool:
        return (self.run is not None and self.run.status == RUN_DONE and bool(self.checks)
                and all(c.passed for c in self.checks))

    @property
    def pending(self) -> bool:
        return self.run is not None and self.run.status in (RUN_QUEUED, RUN_RUNNING)


@dataclass
class Gate:
    revision: QuestionRevision
    torch_version: str
    combos: list[ComboGate]
    has_snippet: bool

    @property
    def passed(self) -> bool:
        return self.has_snippet and bool(self.combos) and all(c.passed for c in self.combos)

    @property
    def pending(self) -> bool:
        return any(c.pending for c in self.combos)

    @property
    def complete(self) -> bool:
        """Every combination has a finished (or permanently failed) run."""
        return bool(self.combos) and all(c.run is not None and not c.pending for c in self.combos)

    def reason(self) -> str:
        if not self.has_snippet:
            return "this question has no snippet; only an admin may publish it, with an override"
        if self.passed:
            return "every expectation passes on torch " + self.torch_version
        missing = sum(1 for c in self.combos if c.run is None)
        if missing:
            return (f"{missing} knob combination(s) not run on torch {self.torch_version} yet: "
                    "press Verify all")
        if self.pending:
            return "runs are still in progress"
        failed = sum(1 for c in self.combos if not c.passed)
        return f"{failed} knob combination(s) fail their expectations"

    def verdict_checks(self) -> list[dict[str, Any]]:
        return [{"params": c.params, "world_size": c.world_size,
                 "run_id": c.run.id if c.run else None,
                 "failure": c.run.failure_reason if c.run else "not run",
                 "checks": [x.to_json() for x in c.checks]} for c in self.combos]


def gate(*, db_session: Session, revision: QuestionRevision, versions: tuple[str, str]) -> Gate:
    """The publish gate of a revision: each audited combination's live run and its checks."""
    doc = revision_doc(revision)
    torch_v, harness_v = versions
    if doc.verify is None or doc.snippet_text is None:
        return Gate(revision, torch_v, [], has_snippet=False)
    combos = []
    for combo in verify_service.audit_combinations(doc.verify):
        req = verify_service.request_for(doc, combo, torch_version=torch_v, harness_version=harness_v,
                                         revision_id=revision.id)
        run = verify_service.find_live(db_session=db_session, key=req.key)
        checks = []
        if run is not None and run.status == RUN_DONE and run.result is not None:
            checks = evaluate(doc.verify.expect, run.result, req.params, req.world_size)
        combos.append(ComboGate(req.params, req.world_size, run, checks))
    return Gate(revision, torch_v, combos, has_snippet=True)


def request_verification(
    *, db_session: Session, revision: QuestionRevision, versions: tuple[str, str], user: User,
    fresh: bool = False,
) -> list[Run]:
    """Queue (or reuse from the cache) a run for every audited combination of a revision."""
    doc = revision_doc(revision)
    if doc.verify is None or doc.snippet_text is None:
        return []
    runs = []
    for combo in verify_service.audit_combinations(doc.verify):
        req = verify_service.request_for(doc, combo, torch_version=versions[0],
                                         harness_version=versions[1], revision_id=revision.id,
                                         requested_by=f"author:{user.id}")
        run, _cached = verify_service.request_run(db_session=db_session, req=req, fresh=fresh)
        runs.append(run)
    return runs


def publishable_revision(*, db_session: Session, question: Question) -> QuestionRevision | None:
    """What publishing would show learners: the draft, or an unpublished current revision."""
    if question.draft_revision_id is not None:
        return db_session.get(QuestionRevision, question.draft_revision_id)
    if question.status != STATUS_PUBLISHED and question.current_revision_id is not None:
        return db_session.get(QuestionRevision, question.current_revision_id)
    return None


def _go_live(db_session: Session, question: Question, rev: QuestionRevision) -> None:
    doc = revision_doc(rev)
    _ensure_topic(db_session, doc.topic)
    make_current(question=question, revision=rev, doc=doc)
    question.draft_revision_id = None
    question.status = STATUS_PUBLISHED
    db_session.flush()


def publish(
    *, db_session: Session, question: Question, user: User, versions: tuple[str, str]
) -> QuestionRevision:
    """Show learners the draft, if every expectation passes on this torch (a verdict is stored)."""
    require_edit(db_session=db_session, user=user, question=question)
    rev = publishable_revision(db_session=db_session, question=question)
    if rev is None:
        raise PublishRefused("there is no unpublished revision to publish")
    g = gate(db_session=db_session, revision=rev, versions=versions)
    if not g.has_snippet:
        raise PublishRefused(g.reason(), g)
    if g.complete:
        verify_service.record_verdict(db_session=db_session, revision_id=rev.id,
                                      torch_version=g.torch_version, passed=g.passed,
                                      checks=g.verdict_checks())
    if not g.passed:
        audit(db_session=db_session, user=user, action="question.publish_refused",
              target=question.slug, detail={"revision": rev.number, "reason": g.reason()})
        raise PublishRefused(g.reason(), g)
    _go_live(db_session, question, rev)
    audit(db_session=db_session, user=user, action="question.publish", target=question.slug,
          detail={"revision": rev.number, "torch": g.torch_version})
    return rev


def publish_without_check(
    *, db_session: Session, question: Question, user: User, reason: str
) -> QuestionRevision:
    """An admin publishes a question that has no snippet to run.

    Revisions are immutable, so the override is a new revision (same content) whose
    note records who overrode the gate and why; it is also in the audit log.
    """
    if user.role != ROLE_ADMIN:
        raise NotAllowed("Only an admin may publish without a measurement.")
    reason = reason.strip()
    if not reason:
        raise PublishRefused("say why this question may be published without a measurement")
    rev = publishable_revision(db_session=db_session, question=question)
    if rev is None:
        raise PublishRefused("there is no unpublished revision to publish")
    doc = revision_doc(rev)
    if doc.verify is not None:
        raise PublishRefused("this question has a snippet: its expectations must pass instead")
    note = f"Published without a measurement by {user.username} (override): {reason}"
    final = _append_revision(db_session, question, doc, source=SOURCE_OVERRIDE, user=user, note=note)
    _go_live(db_session, question, final)
    audit(db_session=db_session, user=user, action="question.publish_override",
          target=question.slug, detail={"revision": final.number, "from": rev.number,
                                        "reason": reason})
    return final


# The author's list ------------------------------------------------------------------------

VERIFICATION_STATES = ("verified", "failed", "unverified", "no snippet")


@dataclass
class QuestionRow:
    question: Question
    editing: QuestionRevision
    owner_id: int | None
    verification: str
    verdict: Verdict | None

    @property
    def has_draft(self) -> bool:
        return self.question.draft_revision_id is not None


def list_questions(
    *, db_session: Session, text: str = "", topic: str = "", tag: str = "",
    difficulty: int | None = None, status: str = "", verification: str = "",
) -> list[QuestionRow]:
    """Every question with the state of the revision an author would edit, filtered."""
    stmt = select(Question).order_by(Question.topic, Question.slug)
    if topic:
        stmt = stmt.where(Question.topic == topic)
    if difficulty is not None:
        stmt = stmt.where(Question.difficulty == difficulty)
    if status:
        stmt = stmt.where(Question.status == status)
    questions = list(db_session.scalars(stmt).unique())
    if not questions:
        return []
    rev_ids = {q.draft_revision_id or q.current_revision_id for q in questions} - {None}
    revisions = {r.id: r for r in db_session.scalars(
        select(QuestionRevision).where(QuestionRevision.id.in_(rev_ids)))}
    owners: dict[int, int | None] = {
        qid: author_id for qid, author_id in db_session.execute(
            select(QuestionRevision.question_id, QuestionRevision.author_id)
            .where(QuestionRevision.number == 1,
                   QuestionRevision.question_id.in_([q.id for q in questions])))
    }
    verdicts: dict[int, Verdict] = {}
    for v in db_session.scalars(select(Verdict).where(Verdict.revision_id.in_(rev_ids))
                                .order_by(Verdict.created_at, Verdict.id)):
        verdicts[v.revision_id] = v
    needle = text.strip().lower()
    rows = []
    for q in questions:
        rev = revisions.get(q.draft_revision_id or q.current_revision_id or -1)
        if rev is None:
            continue
        content = rev.content
        if needle and needle not in q.slug and needle not in str(content.get("title", "")).lower():
            continue
        if tag and tag not in (content.get("tags") or []):
            continue
        verdict = verdicts.get(rev.id)
        if content.get("verify") is None:
            state = "no snippet"
        elif verdict is None:
            state = "unverified"
        else:
            state = "verified" if verdict.passed else "failed"
        if verification and state != verification:
            continue
        rows.append(QuestionRow(q, rev, owners.get(q.id), state, verdict))
    return rows


# Bank upload and download -----------------------------------------------------------------


@dataclass
class UploadReport:
    upload_id: str | None
    filename: str
    files: list[str]
    skipped: list[str]
    bank: Bank | None
    preview: ImportReport | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.bank is not None and self.bank.ok


def _load_files(files: dict[str, bytes]) -> Bank:
    with tempfile.TemporaryDirectory(prefix="ddpdrill-upload-") as tmp:
        root = bankfiles.unpack(files, Path(tmp))
        return load_bank(root)


def _preview(db_session: Session, bank: Bank, retire_missing: bool) -> ImportReport:
    """What importing would do, found by importing inside a savepoint and rolling it back."""
    nested = db_session.begin_nested()
    try:
        return import_bank(db_session=db_session, bank=bank, retire_missing=retire_missing)
    finally:
        nested.rollback()
        db_session.expire_all()


def receive_upload(
    *, db_session: Session, user: User, filename: str, files: dict[str, bytes], skipped: list[str],
) -> UploadReport:
    """Validate uploaded bank files and keep them for a confirmed import."""
    db_session.execute(delete(BankUpload).where(BankUpload.created_at < utcnow() - UPLOAD_RETENTION))
    bank = _load_files(files)
    report = UploadReport(None, filename, sorted(files), skipped, bank, None)
    if not files:
        report.error = "the upload holds no .yaml or .py files"
        return report
    if bank.ok:
        report.preview = _preview(db_session, bank, retire_missing=False)
        upload = BankUpload(id=str(uuid.uuid4()), user_id=user.id, filename=filename[:200],
                            data=bankfiles.to_zip(files))
        db_session.add(upload)
        db_session.flush()
        report.upload_id = upload.id
    audit(db_session=db_session, user=user, action="bank.upload", target=filename,
          detail={"files": len(files), "errors": len(bank.errors), "upload": report.upload_id})
    return report


def confirm_import(
    *, db_session: Session, user: User, upload_id: str, retire_missing: bool
) -> tuple[UploadReport, ImportReport | None]:
    """Import a validated upload in the caller's transaction; the upload is then deleted."""
    upload = db_session.get(BankUpload, upload_id)
    if upload is None:
        raise LookupError("that upload has expired or was already imported; upload it again")
    files, _ = bankfiles.files_from_zip(upload.data)
    bank = _load_files(files)
    report = UploadReport(upload.id, upload.filename, sorted(files), [], bank, None)
    if not bank.ok:
        return report, None
    result = import_bank(db_session=db_session, bank=bank, retire_missing=retire_missing)
    db_session.delete(upload)
    audit(db_session=db_session, user=user, action="bank.import", target=upload.filename,
          detail={"created": result.created, "updated": result.updated,
                  "retired": result.retired, "restored": result.restored,
                  "unchanged": len(result.unchanged), "retire_missing": retire_missing})
    return report, result


def export_zip(*, db_session: Session) -> bytes:
    """The bank (current revisions of every question not retired) as a zip."""
    docs, topics = export_bank(db_session=db_session)
    return bankfiles.bank_zip(docs, topics)
