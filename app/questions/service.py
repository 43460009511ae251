"""Questions in the database: importing the bank, revisions, listing and loading."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import bindparam, func, select
from sqlalchemy.orm import Session

from app.questions.bank import Bank, content_hash, doc_from_data, doc_to_data
from app.questions.models import (
    STATUS_PUBLISHED,
    STATUS_RETIRED,
    Question,
    QuestionRevision,
    Topic,
)
from app.questions.schema import ROUND_TITLES, ROUNDS, QuestionDoc, TopicDoc


@dataclass
class ImportReport:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    retired: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"{len(self.created)} created, {len(self.updated)} updated, "
            f"{len(self.unchanged)} unchanged, {len(self.retired)} retired, "
            f"{len(self.restored)} restored"
        )


# Parsed documents by content hash: a revision never changes, and an answer would otherwise
# validate its JSON again several times. Equal hashes mean equal documents, whichever
# database they came from.
_DOCS: dict[str, QuestionDoc] = {}
_DOCS_MAX = 1024


def _remember(key: str, doc: QuestionDoc) -> QuestionDoc:
    if key:
        if len(_DOCS) >= _DOCS_MAX:
            _DOCS.clear()
        _DOCS[key] = doc
    return doc


def revision_doc(revision: QuestionRevision) -> QuestionDoc:
    """The validated question document a revision holds (treat it as read-only)."""
    key = revision.content_hash
    doc = _DOCS.get(key) if key else None
    return doc or _remember(key, doc_from_data(revision.content, revision.snippet_text))


# Rendered variants by (content hash, variant). A rendering is a pure function of the
# revision's document and the index, so nothing rendered is ever stored: a revision pins
# its variants by being immutable, and an attempt pins one by its index.
_RENDERS: dict[tuple[str, int], QuestionDoc] = {}


def render_variant(*, doc: QuestionDoc, key: str, variant: int) -> QuestionDoc:
    """`doc.render(variant)`, cached under the document's content hash `key` ("" caches nothing).

    Raises IndexError for a variant the question does not have.
    """
    if not doc.variables:
        return doc.render(variant)
    cached = _RENDERS.get((key, variant)) if key else None
    if cached is None:
        cached = doc.render(variant)
        if key:
            if len(_RENDERS) >= _DOCS_MAX:
                _RENDERS.clear()
            _RENDERS[(key, variant)] = cached
    return cached


def revision_variant(*, revision: QuestionRevision, variant: int) -> QuestionDoc:
    """Variant `variant` of a revision as a plain document, as learners, graders and the gate
    see it (cached; IndexError past the last variant)."""
    return render_variant(doc=revision_doc(revision), key=revision.content_hash, variant=variant)


@dataclass(frozen=True)
class PublishedQuestion:
    """A published question as a learner answers it: its current revision's id and document.

    What every answer reads first: one prebuilt statement, where the ORM would load the
    Question and its revision in two and parse the revision's whole JSON again; the
    revision's content is read only when its document is not cached yet.
    """

    id: int
    slug: str
    title: str
    topic: str
    revision_id: int
    doc: QuestionDoc
    # The revision's content hash: the cache key of its rendered variants.
    content_hash: str = ""

    def variant(self, i: int) -> QuestionDoc:
        """Variant i of this question as a plain document (cached; IndexError past the last)."""
        return render_variant(doc=self.doc, key=self.content_hash, variant=i)


_PUBLISHED = (
    select(Question.id, Question.title, Question.topic, QuestionRevision.id,
           QuestionRevision.content_hash)
    .join(QuestionRevision, QuestionRevision.id == Question.current_revision_id)
    .where(Question.slug == bindparam("slug"), Question.status == STATUS_PUBLISHED)
)
_CONTENT = (select(QuestionRevision.content, QuestionRevision.snippet_text)
            .where(QuestionRevision.id == bindparam("revision_id")))


def published_question(*, db_session: Session, slug: str) -> PublishedQuestion | None:
    """The published question with this slug, ready to answer; None if learners may not see it."""
    conn = db_session.connection()
    row = conn.execute(_PUBLISHED, {"slug": slug}).first()
    if row is None:
        return None
    question_id, title, topic, revision_id, key = row
    doc = _DOCS.get(key) if key else None
    if doc is None:
        content, snippet = conn.execute(_CONTENT, {"revision_id": revision_id}).one()
        doc = _remember(key, doc_from_data(content, snippet))
    return PublishedQuestion(id=question_id, slug=slug, title=title, topic=topic,
                             revision_id=revision_id, doc=doc, content_hash=key or "")


def append_revision(
    *,
    db_session: Session,
    question: Question,
    doc: QuestionDoc,
    source: str,
    author_id: int | None = None,
    note: str = "",
) -> QuestionRevision:
    """Append a new immutable revision without changing what learners see."""
    last = db_session.scalar(
        select(func.max(QuestionRevision.number)).where(QuestionRevision.question_id == question.id)
    )
    revision = QuestionRevision(
        question_id=question.id,
        number=(last or 0) + 1,
        content=doc_to_data(doc),
        snippet_text=doc.snippet_text,
        content_hash=content_hash(doc),
        source=source,
        author_id=author_id,
        note=note,
    )
    db_session.add(revision)
    db_session.flush()
    return revision


def add_revision(
    *,
    db_session: Session,
    question: Question,
    doc: QuestionDoc,
    source: str,
    author_id: int | None = None,
    note: str = "",
) -> QuestionRevision:
    """Append a new immutable revision and make it the question's current one."""
    revision = append_revision(db_session=db_session, question=question, doc=doc, source=source,
                               author_id=author_id, note=note)
    make_current(question=question, revision=revision, doc=doc)
    return revision


def make_current(*, question: Question, revision: QuestionRevision, doc: QuestionDoc) -> None:
    """Point the question at a revision and copy its list fields onto the question."""
    question.current_revision_id = revision.id
    question.current_revision = revision
    denormalise(question, doc)


def denormalise(question: Question, doc: QuestionDoc) -> None:
    """Copy the fields lists filter on from the document onto the question row."""
    question.topic = doc.topic
    question.title = doc.title
    question.difficulty = doc.difficulty
    question.type = doc.type
    question.tags = list(doc.tags)
    question.has_snippet = doc.verify is not None


def upsert_topic(*, db_session: Session, slug: str, topic: TopicDoc) -> Topic:
    """Create or update a topic's title, description, position, group and round."""
    row = db_session.get(Topic, slug)
    if row is None:
        row = Topic(slug=slug, title=topic.title, description=topic.description,
                    position=topic.position, group=topic.group, round=topic.round)
        db_session.add(row)
    else:
        row.title, row.description, row.position = topic.title, topic.description, topic.position
        row.group, row.round = topic.group, topic.round
    db_session.flush()
    return row


def import_bank(*, db_session: Session, bank: Bank, retire_missing: bool = True) -> ImportReport:
    """Upsert every question of a valid bank by slug; a changed one gets a new revision.

    The caller owns the transaction, so a failure anywhere leaves the database as it was.
    """
    if bank.errors:
        raise ValueError("refusing to import a bank with errors")
    report = ImportReport()
    for slug, topic in bank.topics.items():
        upsert_topic(db_session=db_session, slug=slug, topic=topic)
    existing = {q.slug: q for q in db_session.scalars(select(Question))}
    for doc in bank.questions:
        question = existing.get(doc.slug)
        if question is None:
            question = Question(
                slug=doc.slug, status=STATUS_PUBLISHED, topic=doc.topic, title=doc.title,
                difficulty=doc.difficulty, type=doc.type,
            )
            db_session.add(question)
            db_session.flush()
            add_revision(db_session=db_session, question=question, doc=doc, source="import")
            report.created.append(doc.slug)
            continue
        current = question.current_revision
        if current is None or current.content_hash != content_hash(doc):
            add_revision(db_session=db_session, question=question, doc=doc, source="import")
            # An unpublished edit made before this import would, if published later,
            # silently undo the import: it stays in the history, no longer pending.
            question.draft_revision_id = None
            report.updated.append(doc.slug)
        else:
            report.unchanged.append(doc.slug)
        if question.status == STATUS_RETIRED:
            question.status = STATUS_PUBLISHED
            report.restored.append(doc.slug)
    if retire_missing:
        present = {doc.slug for doc in bank.questions}
        for slug, question in existing.items():
            if slug not in present and question.status != STATUS_RETIRED:
                question.status = STATUS_RETIRED
                report.retired.append(slug)
    db_session.flush()
    return report


def export_bank(*, db_session: Session) -> tuple[list[QuestionDoc], dict[str, TopicDoc]]:
    """The current revision of every question that is not retired, and every topic."""
    topics = {
        t.slug: TopicDoc.model_validate({"title": t.title, "description": t.description,
                                         "position": t.position, "group": t.group,
                                         "round": t.round})
        for t in db_session.scalars(select(Topic).order_by(Topic.position, Topic.slug))
    }
    docs = []
    for question in db_session.scalars(
        select(Question).where(Question.status != STATUS_RETIRED).order_by(Question.slug)
    ):
        if question.current_revision is not None:
            docs.append(revision_doc(question.current_revision))
    return docs, topics


def get_question(*, db_session: Session, slug: str) -> Question | None:
    """The question with this slug, whatever its status."""
    return db_session.scalar(select(Question).where(Question.slug == slug))


def get_published(*, db_session: Session, slug: str) -> Question | None:
    """The question with this slug if learners may see it."""
    question = get_question(db_session=db_session, slug=slug)
    if question is None or question.status != STATUS_PUBLISHED or question.current_revision is None:
        return None
    return question


# The home page shows a newcomer a real run of these questions, values and all: so they are
# kept out of quizzes, mock interviews and class assignments (app/reveal.py's one
# exception: their measurement is public).
SAMPLE_SLUGS = frozenset({"averaged-gradient-two-ranks"})


def list_published(
    *,
    db_session: Session,
    topics: list[str] | None = None,
    tag: str | None = None,
    difficulty: int | None = None,
    types: list[str] | None = None,
) -> list[Question]:
    """Published questions, filtered (`types`: single, multi, numeric, trace), in topic then
    difficulty order."""
    stmt = (
        select(Question)
        .join(Topic, Topic.slug == Question.topic)
        .where(Question.status == STATUS_PUBLISHED)
        .order_by(Topic.position, Question.topic, Question.difficulty, Question.slug)
    )
    if topics:
        stmt = stmt.where(Question.topic.in_(topics))
    if difficulty is not None:
        stmt = stmt.where(Question.difficulty == difficulty)
    if types:
        stmt = stmt.where(Question.type.in_(types))
    questions = list(db_session.scalars(stmt).unique())
    if tag:
        questions = [q for q in questions if tag in (q.tags or [])]
    return questions


@dataclass(frozen=True)
class QuestionLink:
    slug: str
    title: str


@dataclass(frozen=True)
class TopicSequence:
    """A topic's title and its published questions in list_published's order, as links."""

    title: str | None
    questions: list[QuestionLink]


# Built once: every question page and every answer shows where it is in its topic.
_SEQUENCE = (select(Question.slug, Question.title, Topic.title)
             .join(Topic, Topic.slug == Question.topic)
             .where(Question.status == STATUS_PUBLISHED, Question.topic == bindparam("topic"))
             .order_by(Question.difficulty, Question.slug))


def topic_sequence(*, db_session: Session, topic: str) -> TopicSequence:
    """The question page's "question 3 of 7" and "next question", in one statement.

    Loading the whole questions (each with its revision's JSON) cost a sixth of an
    answer's time; the links and the topic's title need no more than this.
    """
    rows = db_session.connection().execute(_SEQUENCE, {"topic": topic}).all()
    return TopicSequence(title=rows[0][2] if rows else None,
                         questions=[QuestionLink(slug, title) for slug, title, _ in rows])


@dataclass
class TopicSummary:
    topic: Topic
    count: int
    difficulties: dict[int, int]


def topic_summaries(*, db_session: Session) -> list[TopicSummary]:
    """Every topic with its published question count and count per difficulty."""
    rows = db_session.execute(
        select(Question.topic, Question.difficulty, func.count())
        .where(Question.status == STATUS_PUBLISHED)
        .group_by(Question.topic, Question.difficulty)
    ).all()
    per_topic: dict[str, dict[int, int]] = {}
    for topic_slug, difficulty, count in rows:
        per_topic.setdefault(topic_slug, {})[difficulty] = count
    out = []
    for topic in db_session.scalars(select(Topic).order_by(Topic.position, Topic.slug)):
        diffs = per_topic.get(topic.slug, {})
        if diffs:
            out.append(TopicSummary(topic=topic, count=sum(diffs.values()), difficulties=diffs))
    return out


@dataclass
class TopicGroup:
    title: str
    topics: list[TopicSummary]

    @property
    def count(self) -> int:
        return sum(t.count for t in self.topics)


# Topics whose _topic.yaml names no group are listed under this heading, last.
UNGROUPED = "More topics"


def topic_groups(summaries: list[TopicSummary]) -> list[TopicGroup]:
    """Topic summaries under their group headings, groups in order of their first topic."""
    groups: dict[str, TopicGroup] = {}
    for s in summaries:
        title = s.topic.group or UNGROUPED
        groups.setdefault(title, TopicGroup(title, [])).topics.append(s)
    return sorted(groups.values(), key=lambda g: g.title == UNGROUPED)


@dataclass
class RoundGroups:
    """One interview round's topics, under their group headings."""

    slug: str
    title: str
    groups: list[TopicGroup]

    @property
    def count(self) -> int:
        return sum(g.count for g in self.groups)

    @property
    def topics(self) -> list[TopicSummary]:
        return [t for g in self.groups for t in g.topics]


def topic_rounds(summaries: list[TopicSummary]) -> list[RoundGroups]:
    """Topic summaries by interview round (in ROUNDS order), then under their group headings;
    a round without a published topic is left out."""
    by_round: dict[str, list[TopicSummary]] = {}
    for s in summaries:
        by_round.setdefault(s.topic.round if s.topic.round in ROUNDS else ROUNDS[0], []).append(s)
    return [RoundGroups(r, ROUND_TITLES[r], topic_groups(by_round[r]))
            for r in ROUNDS if r in by_round]


def get_topic(*, db_session: Session, slug: str) -> Topic | None:
    """The topic with this slug."""
    return db_session.get(Topic, slug)
