"""Exporting the bank: files that load back to the same questions and import with no change."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from app.questions.bank import load_bank, write_bank
from app.questions.service import export_bank
from tests.factories import FIXTURE_BANK, copy_bank, import_folder


def _export(session_factory: sessionmaker[Session], folder: Path) -> list[Path]:
    with session_factory() as session:
        docs, topics = export_bank(db_session=session)
    return write_bank(folder, docs, topics)


def test_exported_files_load_to_the_same_questions_and_snippets(
    session_factory: sessionmaker[Session], tmp_path: Path
) -> None:
    import_folder(session_factory, FIXTURE_BANK)
    _export(session_factory, tmp_path / "out")

    original, exported = load_bank(FIXTURE_BANK), load_bank(tmp_path / "out")

    assert exported.ok, [str(e) for e in exported.errors]
    by_slug = {q.slug: q for q in exported.questions}
    for doc in original.questions:
        assert by_slug[doc.slug] == doc
        assert by_slug[doc.slug].snippet_text == doc.snippet_text
    assert exported.topics == original.topics


def test_export_then_import_reports_no_change_and_a_second_export_is_identical(
    session_factory: sessionmaker[Session], tmp_path: Path
) -> None:
    import_folder(session_factory, FIXTURE_BANK)
    written = _export(session_factory, tmp_path / "first")

    report = import_folder(session_factory, tmp_path / "first")
    assert (report.created, report.updated, report.retired, report.restored) == ([], [], [], [])
    assert len(report.unchanged) == 5

    again = _export(session_factory, tmp_path / "second")
    assert [p.relative_to(tmp_path / "second") for p in again] == [
        p.relative_to(tmp_path / "first") for p in written]
    for path in written:
        twin = tmp_path / "second" / path.relative_to(tmp_path / "first")
        assert twin.read_bytes() == path.read_bytes(), path


def test_export_leaves_out_retired_questions(session_factory: sessionmaker[Session], tmp_path: Path) -> None:
    bank_dir = copy_bank(tmp_path / "bank")
    import_folder(session_factory, bank_dir)
    (bank_dir / "traces" / "fixture-trace-join.yaml").unlink()
    import_folder(session_factory, bank_dir)

    _export(session_factory, tmp_path / "out")

    assert not (tmp_path / "out" / "traces" / "fixture-trace-join.yaml").exists()
    assert (tmp_path / "out" / "traces" / "fixture-trace-buckets.yaml").exists()
