"""Drafts and revisions, publishing through the gate, and bank uploads.

Editing never changes what learners see: every save appends an immutable
revision and points `Question.draft_revision_id` at it; only `publish` moves
`current_revision_id` (what learners see) to the draft, and only when every
audited knob combination of the draft has a finished run on the current torch
whose expectations all pass.
"""

from __future__ import annotations

import difflib
import tempfile
import uuid
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app import ratelimit
from app.accounts.models import ROLE_ADMIN, ROLE_AUTHOR, User
from app.accounts.service import audit
from app.authoring import bankfiles
from app.authoring.models import BankUpload
from app.db import utcnow
from app.errors import Conflict, Forbidden, NotFound
from app.questions import variants as templating
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
from app.questions.values import describe_variant
from app.quizzes.grading import correct_answer
from app.verify import gate
from app.verify import results as verify_results
from app.verify import service as verify_service
from app.verify.expectations import CheckResult, evaluate
from app.verify.models import RUN_FAILED, Run, Verdict

# An upload not confirmed within this time is deleted.
UPLOAD_RETENTION = timedelta(hours=1)

SOURCE_EDITOR = "editor"
SOURCE_REVERT = "revert"
SOURCE_OVERRIDE = "override"
# A revision an author proposed for a question that is not theirs: the draft an admin reviews
# and publishes through the gate.
SOURCE_PROPOSAL = "proposal"


class NotAllowed(Forbidden):
    """The user may not do this to this question."""


class PublishRefused(Conflict):
    """The publish gate is closed; `gate` says why."""

    def __init__(self, message: str, result: gate.Gate | None = None) -> None:
        super().__init__(message)
        self.gate = result


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


def can_propose(*, user: User, question: Question) -> bool:
    """Any author may read every question and propose an edit to one they cannot edit."""
    return user.role in (ROLE_ADMIN, ROLE_AUTHOR) and question.status != STATUS_RETIRED


def require_edit(*, db_session: Session, user: User, question: Question) -> None:
    if not can_edit(db_session=db_session, user=user, question=question):
        raise NotAllowed("Only the question's author or an admin may change it.")


def editing_revision(*, db_session: Session, question: Question) -> QuestionRevision:
    """The revision the editor starts from: the unpublished draft, else the current one."""
    rev_id = question.draft_revision_id or question.current_revision_id
    rev = db_session.get(QuestionRevision, rev_id) if rev_id is not None else None
    if rev is None:
        raise NotFound(f"question {question.slug!r} has no revision")
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


def propose_edit(
    *, db_session: Session, question: Question, doc: QuestionDoc, user: User, note: str = "",
    base_revision_id: int | None = None,
) -> QuestionRevision | None:
    """An edit proposed by an author who may not edit this question: a new revision, made the
    question's draft, that an admin reviews (history, diff) and publishes through the gate.
    None when nothing changed; Conflict when the question already has a draft waiting, or
    someone saved after the proposer opened it."""
    if not can_propose(user=user, question=question):
        raise NotAllowed("Only an author may propose an edit.")
    if doc.slug != question.slug:
        raise Conflict("the slug of an existing question cannot change")
    base = editing_revision(db_session=db_session, question=question)
    if base_revision_id is not None and base_revision_id != base.id:
        raise Conflict(f"revision {base.number} was saved after you opened the question; "
                       "reload to see it, then make your change again")
    if question.draft_revision_id is not None:
        raise Conflict(f"revision {base.number} is already waiting to be published; an admin "
                       "reviews it first, then your proposal can follow")
    if base.content_hash == content_hash(doc):
        return None
    note = f"Proposed by {user.username}" + (f": {note}" if note.strip() else "")
    rev = _append_revision(db_session, question, doc, source=SOURCE_PROPOSAL, user=user, note=note)
    _make_draft(db_session, question, rev, doc)
    audit(db_session=db_session, user=user, action="question.propose", target=question.slug,
          detail={"revision": rev.number})
    return rev


def proposals(*, db_session: Session) -> list[tuple[Question, QuestionRevision]]:
    """Questions whose draft is a proposal waiting for an admin, oldest first."""
    rows = db_session.execute(
        select(Question, QuestionRevision)
        .join(QuestionRevision, QuestionRevision.id == Question.draft_revision_id)
        .where(QuestionRevision.source == SOURCE_PROPOSAL)
        .order_by(QuestionRevision.created_at, QuestionRevision.id))
    return [(q, r) for q, r in rows]


def revert(*, db_session: Session, question: Question, number: int, user: User) -> QuestionRevision:
    """A new draft revision whose content equals revision `number`."""
    require_edit(db_session=db_session, user=user, question=question)
    old = get_revision(db_session=db_session, question=question, number=number)
    if old is None:
        raise NotFound(f"{question.slug!r} has no revision {number}")
    doc = revision_doc(old)
    rev = _append_revision(db_session, question, doc, source=SOURCE_REVERT, user=user,
                           note=f"Revert to revision {number}")
    _make_draft(db_session, question, rev, doc)
    audit(db_session=db_session, user=user, action="question.revert", target=question.slug,
          detail={"revision": rev.number, "to": number})
    return rev


def author_names(*, db_session: Session, revisions: list[QuestionRevision]) -> dict[int, str]:
    """The usernames of these revisions' authors, by user id."""
    ids = {r.author_id for r in revisions if r.author_id is not None}
    if not ids:
        return {}
    rows = db_session.execute(select(User.id, User.username).where(User.id.in_(ids)))
    return {uid: name for uid, name in rows}


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


# The publish gate (the rule itself is app.verify.gate, shared with `bank verify`) -----------


def request_verification(
    *, db_session: Session, question: Question, user: User, fresh: bool = False,
    limit_per_minute: int = 30,
) -> list[Run]:
    """Queue (or reuse from the cache) a run for every audited combination of the revision that
    publishing would show; audited. Empty when there is nothing to publish or run.

    These are shared runs (the cache learners will hit once it is published). A fresh
    request never takes from learners the runs they are shown now, and new runs count
    against the author's budget of runs per minute."""
    rev = publishable_revision(db_session=db_session, question=question)
    if rev is None:
        return []
    versions = verify_service.engine_versions()
    planned = gate.plan(revision_doc(rev), revision_id=rev.id, versions=versions)
    new = sum(1 for req in planned if fresh or verify_service.find_live(
        db_session=db_session, key=req.key) is None)
    _count_author_runs(db_session, user, new, limit_per_minute)
    runs = gate.request_runs(db_session=db_session, revision=rev, versions=versions,
                             requested_by=f"author:{user.id}", fresh=fresh, keep_published=True)
    audit(db_session=db_session, user=user, action="question.verify", target=question.slug,
          detail={"revision": rev.number, "runs": [r.id for r in runs]})
    return runs


def _count_author_runs(db_session: Session, user: User, new: int, limit_per_minute: int) -> None:
    if new:
        ratelimit.hit(db_session=db_session, bucket="author-run", key=str(user.id),
                      limit=limit_per_minute, window_s=60, cost=new,
                      message=f"Too many new runs in the last minute (at most {limit_per_minute}); "
                              "cached runs stay free. Wait a moment and run again.")


def run_draft(
    *, db_session: Session, doc: QuestionDoc, user: User, params: dict[str, Any], client_ip: str,
    caps: verify_service.PrivateCaps, fresh: bool = False, limit_per_minute: int = 30,
) -> Run:
    """Run an editor's snippet as it stands (saved or not) with these knob values; audited.

    A finished run of the same snippet and knobs, shared or the author's own, is reused
    (unless `fresh`). A new run is the author's own (private): it waits in the same fair
    queue as learners' code, never ahead of the bank's runs, and never replaces the run
    learners are shown. Raises knobs.InvalidKnob for a value the draft does not allow,
    RateLimited past the author's budget or the queue's caps.
    """
    torch_v, harness_v = verify_service.engine_versions()
    shared = verify_service.request_for(doc, params, torch_version=torch_v, harness_version=harness_v,
                                        requested_by=f"author:{user.id}")
    live = verify_service.find_live(db_session=db_session, key=shared.key)
    if live is not None and live.status != RUN_FAILED and not fresh:
        run, cached = live, True
    else:
        own = replace(shared, owner=f"author:{user.id}", requested_ip=client_ip)
        mine = verify_service.find_live(db_session=db_session, key=own.key)
        reuse = mine is not None and mine.status != RUN_FAILED and not fresh
        if not reuse:
            _count_author_runs(db_session, user, 1, limit_per_minute)
            verify_service.check_private_capacity(db_session=db_session,
                                                  requested_by=own.requested_by or "",
                                                  client_ip=client_ip, new=1, caps=caps)
        run, cached = verify_service.request_run(db_session=db_session, req=own, fresh=fresh)
    audit(db_session=db_session, user=user, action="run.request", target=doc.slug,
          detail={"run": run.id, "params": run.params, "cached": cached})
    return run


def run_draft_variants(
    *, db_session: Session, doc: QuestionDoc, user: User, params: dict[str, Any], client_ip: str,
    caps: verify_service.PrivateCaps, fresh: bool = False, limit_per_minute: int = 30,
) -> list[tuple[int, Run]]:
    """Run now for every variant of an editor's question (one run without variables): each
    variant's values in its params, its world size as the ranks; audited, counted against the
    author's budget and queued like run_draft."""
    return [(i, run_draft(db_session=db_session, doc=doc.render(i), user=user, params=params,
                          client_ip=client_ip, caps=caps, fresh=fresh,
                          limit_per_minute=limit_per_minute))
            for i in range(doc.variant_count)]


@dataclass
class VariantPreview:
    """One variant of an editor's question, side by side with the others: its values, what a
    learner reads, its key, and (once run) what torch measured for it."""

    index: int
    name: str
    params: dict[str, Any]
    # The compute block's names and their values in this variant.
    computed: dict[str, Any]
    doc: QuestionDoc | None
    key: Any = None
    error: str | None = None
    run: Run | None = None
    # The checks that bind the key (is_answer) and the others, against the run of the defaults.
    measured: list[CheckResult] | None = None


def variant_previews(*, db_session: Session, doc: QuestionDoc, user: User) -> list[VariantPreview]:
    """Every variant of a (valid) editor's question rendered, with its key, its computed values
    and, where a run of its default knobs exists on this torch (shared, or this author's own
    Run now), its checks measured."""
    versions = verify_service.engine_versions()
    out = []
    for i in range(doc.variant_count):
        params = doc.variant_params(i)
        preview = VariantPreview(i, describe_variant(i, params), params, {}, None)
        try:
            values = templating.values_of(params, doc.compute)
            preview.computed = {k: values[k] for k in doc.compute}
            rendered = doc.render(i)
        except (ValueError, templating.TemplateProblem) as exc:
            preview.error = str(exc)
            out.append(preview)
            continue
        preview.doc = rendered
        preview.key = None if rendered.is_exercise else correct_answer(rendered)
        if rendered.verify is not None and rendered.snippet_text is not None:
            req = verify_service.request_for(rendered, {}, torch_version=versions[0],
                                             harness_version=versions[1])
            preview.run = verify_service.find_live(db_session=db_session, key=req.key)
            if preview.run is None or preview.run.status == RUN_FAILED:
                own = replace(req, owner=f"author:{user.id}")
                preview.run = (verify_service.find_live(db_session=db_session, key=own.key)
                               or preview.run)
            result = verify_results.result_of(preview.run) if preview.run is not None else None
            if result is not None:
                preview.measured = evaluate(rendered.verify.expect, result, req.params,
                                            req.world_size, trace=rendered.trace)
        out.append(preview)
    return out


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
    g = gate.check(db_session=db_session, revision=rev, versions=versions)
    if not g.has_snippet:
        raise PublishRefused(g.reason(), g)
    if g.complete:
        gate.record(db_session=db_session, gate=g)
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
        raise NotFound("that upload has expired or was already imported; upload it again")
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


def refuse_upload(*, db_session: Session, user: User, reason: str) -> None:
    """Record an upload that could not be read as bank files."""
    audit(db_session=db_session, user=user, action="bank.upload_rejected", detail={"reason": reason})


def export_zip(*, db_session: Session, user: User) -> bytes:
    """The bank (current revisions of every question not retired) as a zip; audited."""
    docs, topics = export_bank(db_session=db_session)
    data = bankfiles.bank_zip(docs, topics)
    audit(db_session=db_session, user=user, action="bank.export", detail={"bytes": len(data)})
    return data
