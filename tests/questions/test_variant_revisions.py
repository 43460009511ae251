"""Questions with variables in the database: exported back unchanged, and rendered from the
stored revision alone (real SQLite, and PostgreSQL when configured)."""

from __future__ import annotations

from pathlib import Path

import yaml
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.questions import service, variants
from app.questions.bank import doc_to_data, load_bank, write_bank
from app.questions.models import Question, QuestionRevision
from app.questions.service import export_bank, published_question, revision_doc, revision_variant
from tests.factories import import_folder
from tests.questions.test_variants import VARIANT_BANK


def _forget_everything() -> None:
    """Empty every in-process cache, so what follows reads only the database."""
    service._DOCS.clear()
    service._RENDERS.clear()
    variants.compile_template.cache_clear()
    variants.compile_expression.cache_clear()
    variants._assignments_cached.cache_clear()


def _without_keys(data: object) -> object:
    """YAML data with the choice keys the exporter writes (a, b, ...) left out."""
    if isinstance(data, dict):
        return {k: _without_keys(v) for k, v in data.items() if k != "key"}
    if isinstance(data, list):
        return [_without_keys(v) for v in data]
    return data


def test_variant_questions_export_to_the_same_yaml_and_load_back_equal(
    session_factory: sessionmaker[Session], tmp_path: Path,
) -> None:
    import_folder(session_factory, VARIANT_BANK)
    with session_factory() as s:
        docs, topics = export_bank(db_session=s)
    write_bank(tmp_path / "out", docs, topics)
    original, exported = load_bank(VARIANT_BANK), load_bank(tmp_path / "out")
    assert exported.ok, [str(e) for e in exported.errors]
    by_slug = {q.slug: q for q in exported.questions}
    for doc in original.questions:
        again = by_slug[doc.slug]
        assert again == doc and again.snippet_text == doc.snippet_text
        assert list(again.variables) == list(doc.variables) and list(again.compute) == list(doc.compute)
        assert [again.render(i) for i in range(again.variant_count)] == [
            doc.render(i) for i in range(doc.variant_count)]
        source = yaml.safe_load((VARIANT_BANK / doc.topic / f"{doc.slug}.yaml").read_text())
        written = yaml.safe_load((tmp_path / "out" / doc.topic / f"{doc.slug}.yaml").read_text())
        assert _without_keys(written) == source, doc.slug
    # Exported files import as unchanged, and a second export is byte for byte the first.
    report = import_folder(session_factory, tmp_path / "out")
    assert sorted(report.unchanged) == sorted(d.slug for d in original.questions)
    with session_factory() as s:
        docs2, topics2 = export_bank(db_session=s)
    write_bank(tmp_path / "again", docs2, topics2)
    for path in sorted((tmp_path / "out").rglob("*.*")):
        assert (tmp_path / "again" / path.relative_to(tmp_path / "out")).read_bytes() == path.read_bytes()


def test_a_revision_pins_its_variants_without_storing_any_rendering(
    session_factory: sessionmaker[Session],
) -> None:
    import_folder(session_factory, VARIANT_BANK)
    bank = {q.slug: q for q in load_bank(VARIANT_BANK).questions}
    with session_factory() as s:
        revision = s.scalar(select(QuestionRevision).join(Question, Question.current_revision_id
                                                          == QuestionRevision.id)
                            .where(Question.slug == "ring-send-volume"))
        assert revision is not None
        # The stored content is the template, not a rendering of it.
        assert revision.content["prompt"].startswith("{{ world_size }} ranks")
        assert list(revision.content["variables"]) == ["world_size", "tensor_mb"]
        assert revision.content == doc_to_data(bank["ring-send-volume"])
        first = [revision_variant(revision=revision, variant=i) for i in range(8)]
        _forget_everything()
        s.expire_all()
        fresh = s.get(QuestionRevision, revision.id)
        assert fresh is not None
        doc = revision_doc(fresh)
        assert [doc.variant_params(i) for i in range(8)] == [
            bank["ring-send-volume"].variant_params(i) for i in range(8)]
        again = [revision_variant(revision=fresh, variant=i) for i in range(8)]
        assert again == first == [bank["ring-send-volume"].render(i) for i in range(8)]
        assert again[7].answer is not None and again[7].answer.value == 2 * 7 / 8 * 800
        # The cache hands back the same object per (revision, variant).
        assert revision_variant(revision=fresh, variant=3) is again[3]


def test_a_published_question_renders_its_variants(session_factory: sessionmaker[Session]) -> None:
    import_folder(session_factory, VARIANT_BANK)
    with session_factory() as s:
        q = published_question(db_session=s, slug="zero3-memory-case")
        assert q is not None and q.content_hash
        assert q.doc.variant_count == 4
        v = q.variant(3)
        assert v.part(1).answer is not None and v.part(1).answer.value == 16 * 13 / 64
        assert q.variant(3) is v
        plain = published_question(db_session=s, slug="step-time-doubled-talk")
        assert plain is not None and plain.variant(0) is plain.doc
