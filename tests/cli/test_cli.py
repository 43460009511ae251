"""The `ddpdrill` command: bank check, import and export, db upgrade, and serve's preparation."""

from __future__ import annotations

import filecmp
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory
from click.testing import Result
from sqlalchemy import create_engine, inspect, select, text
from sqlalchemy.orm import Session, sessionmaker
from typer.testing import CliRunner

from app.cli import app as cli_app
from app.cli.serve import prepare
from app.migrate import alembic_config
from app.models import Base
from app.questions.models import Question, QuestionRevision, Topic
from app.settings import Settings, get_settings
from tests.factories import BROKEN_BANKS, FIXTURE_BANK, copy_bank, count
from tests.questions.test_bank_check import BROKEN

Run = Callable[..., Result]


@pytest.fixture
def ddpdrill(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Run]:
    """Runs `ddpdrill ARGS` in-process with DDPDRILL_* variables, like a shell would."""
    for name in [n for n in os.environ if n.startswith("DDPDRILL_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("DDPDRILL_DATA_DIR", str(tmp_path / "data"))
    runner = CliRunner()

    def run(*args: object, **env: str) -> Result:
        for name, value in env.items():
            monkeypatch.setenv(f"DDPDRILL_{name.upper()}", value)
        get_settings.cache_clear()  # each invocation is a fresh process in real life
        try:
            return runner.invoke(cli_app, [str(a) for a in args], prog_name="ddpdrill")
        finally:
            get_settings.cache_clear()

    yield run


def _flat(output: str) -> str:
    """Console output with rich's line wrapping undone."""
    return " ".join(output.split())


def _snapshot(session_factory: sessionmaker[Session]) -> list[tuple[object, ...]]:
    with session_factory() as session:
        questions = session.execute(
            select(Question.slug, Question.status, Question.current_revision_id, Question.title)
            .order_by(Question.slug)
        ).all()
        revisions = session.execute(select(QuestionRevision.id).order_by(QuestionRevision.id)).all()
        topics = session.execute(select(Topic.slug, Topic.title).order_by(Topic.slug)).all()
    return [tuple(r) for r in [*questions, *revisions, *topics]]


def test_help_lists_the_commands(ddpdrill: Run) -> None:
    result = ddpdrill("--help")
    assert result.exit_code == 0
    for word in ("serve", "db", "bank"):
        assert word in result.stdout
    bank_help = ddpdrill("bank", "--help").stdout
    for word in ("check", "import", "export"):
        assert word in bank_help


def test_bank_check_exits_0_on_a_valid_bank(ddpdrill: Run) -> None:
    result = ddpdrill("bank", "check", FIXTURE_BANK)
    assert result.exit_code == 0, result.output
    assert "5 questions in 2 topics: all valid" in result.stdout


def test_bank_check_reads_DDPDRILL_BANK_DIR_by_default(ddpdrill: Run) -> None:
    result = ddpdrill("bank", "check", bank_dir=str(BROKEN_BANKS / "two-correct"))
    assert result.exit_code == 1


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_bank_check_exits_1_printing_file_field_and_line(ddpdrill: Run, case: str) -> None:
    file, field, line, words = BROKEN[case]
    result = ddpdrill("bank", "check", BROKEN_BANKS / case)
    assert result.exit_code == 1
    where = f"error {file}:{line}" + (f" [{field}]" if field else "")
    first = result.stderr.splitlines()[0]
    assert first.startswith(where + ": "), result.stderr
    assert words in first
    assert "1 error(s)" in result.stderr


def test_bank_check_does_not_touch_the_database(ddpdrill: Run, tmp_path: Path) -> None:
    db_file = tmp_path / "never.db"
    result = ddpdrill("bank", "check", FIXTURE_BANK, database_url=f"sqlite:///{db_file}")
    assert result.exit_code == 0
    assert not db_file.exists()
    assert not (tmp_path / "data").exists()


def test_bank_import_stores_the_bank_and_reports_counts(
    ddpdrill: Run, database_url: str, session_factory: sessionmaker[Session]
) -> None:
    result = ddpdrill("bank", "import", FIXTURE_BANK, database_url=database_url)
    assert result.exit_code == 0, result.output
    assert "5 created, 0 updated, 0 unchanged, 0 retired, 0 restored" in _flat(result.stdout)
    assert count(session_factory, Question) == 5
    assert count(session_factory, Topic) == 2


@pytest.mark.parametrize("already_imported", [False, True], ids=["empty-db", "loaded-db"])
def test_bank_import_with_one_bad_file_imports_nothing_and_exits_1(
    ddpdrill: Run, database_url: str, session_factory: sessionmaker[Session], tmp_path: Path,
    already_imported: bool,
) -> None:
    if already_imported:
        assert ddpdrill("bank", "import", FIXTURE_BANK, database_url=database_url).exit_code == 0
    before = _snapshot(session_factory)
    bank_dir = copy_bank(tmp_path / "bank")
    # A good change, a new good question and one bad file: none of it may land.
    single = bank_dir / "basics" / "fixture-single.yaml"
    single.write_text(single.read_text().replace("Fixture single choice", "Renamed"))
    (bank_dir / "basics" / "fixture-numeric.yaml").rename(bank_dir / "basics" / "fixture-numeric2.yaml")
    bad = BROKEN_BANKS / "two-correct" / "basics" / "two-correct.yaml"
    (bank_dir / "basics" / "two-correct.yaml").write_text(bad.read_text())

    result = ddpdrill("bank", "import", bank_dir, database_url=database_url)

    assert result.exit_code == 1
    assert "basics/two-correct.yaml:8 [choices]" in result.stderr
    assert "nothing was imported" in result.stderr
    assert _snapshot(session_factory) == before


def test_bank_export_then_import_changes_nothing_and_writes_equal_files(
    ddpdrill: Run, database_url: str, session_factory: sessionmaker[Session], tmp_path: Path
) -> None:
    assert ddpdrill("bank", "import", FIXTURE_BANK, database_url=database_url).exit_code == 0
    first, second = tmp_path / "first", tmp_path / "second"

    exported = ddpdrill("bank", "export", first, database_url=database_url)
    assert exported.exit_code == 0, exported.output
    assert "Wrote 5 questions in 2 topics" in _flat(exported.stdout)
    before = _snapshot(session_factory)
    again = ddpdrill("bank", "import", first, database_url=database_url)
    assert again.exit_code == 0, again.output
    assert "0 created, 0 updated, 5 unchanged, 0 retired, 0 restored" in _flat(again.stdout)
    assert _snapshot(session_factory) == before
    assert ddpdrill("bank", "export", second, database_url=database_url).exit_code == 0

    files = sorted(str(p.relative_to(first)) for p in first.rglob("*") if p.is_file())
    assert files == sorted(str(p.relative_to(second)) for p in second.rglob("*") if p.is_file())
    assert "basics/fixture_single.py" in files
    _match, mismatch, errors = filecmp.cmpfiles(first, second, files, shallow=False)
    assert (mismatch, errors) == ([], [])


def _tables_and_version(url: str) -> tuple[set[str], str]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            version = conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one()
            return set(inspect(conn).get_table_names()), version
    finally:
        engine.dispose()


def test_db_upgrade_migrates_a_fresh_sqlite_file(ddpdrill: Run, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sub' / 'fresh.db'}"
    result = ddpdrill("db", "upgrade", database_url=url)
    assert result.exit_code == 0, result.output
    tables, version = _tables_and_version(url)
    assert set(Base.metadata.tables) <= tables
    assert version == ScriptDirectory.from_config(alembic_config(url)).get_current_head()
    # Running it again is harmless.
    assert ddpdrill("db", "upgrade", database_url=url).exit_code == 0


def test_db_upgrade_without_a_url_creates_the_default_database_in_the_data_dir(
    ddpdrill: Run, tmp_path: Path
) -> None:
    assert ddpdrill("db", "upgrade").exit_code == 0
    tables, _ = _tables_and_version(f"sqlite:///{tmp_path / 'data' / 'ddpdrill.db'}")
    assert "questions" in tables


def test_bank_import_on_the_default_database_migrates_it_first(ddpdrill: Run, tmp_path: Path) -> None:
    result = ddpdrill("bank", "import", FIXTURE_BANK)
    assert result.exit_code == 0, result.output
    assert "5 created" in _flat(result.stdout)
    assert (tmp_path / "data" / "ddpdrill.db").exists()


def test_serve_prepares_the_default_database_and_loads_the_bank_only_when_empty(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", bank_dir=FIXTURE_BANK, secret_key="k")
    prepare(settings)
    url = settings.resolved_database_url
    engine = create_engine(url)
    factory = sessionmaker(engine)
    try:
        assert count(factory, Question) == 5
        revisions = count(factory, QuestionRevision)
        prepare(settings)  # a restart does not import again
        assert count(factory, QuestionRevision) == revisions
    finally:
        engine.dispose()


def test_serve_does_not_load_the_bank_when_told_not_to(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", bank_dir=FIXTURE_BANK, secret_key="k",
                        load_bank_on_start=False)
    prepare(settings)
    engine = create_engine(settings.resolved_database_url)
    try:
        assert count(sessionmaker(engine), Question) == 0
    finally:
        engine.dispose()


def test_bank_check_names_the_expectation_a_moved_key_contradicts(ddpdrill: Run, tmp_path: Path) -> None:
    bank_dir = copy_bank(tmp_path / "bank")
    path = bank_dir / "basics" / "fixture-single.yaml"
    text = path.read_text().replace("    correct: true\n", "")
    path.write_text(text.replace("  - text: The SENTINEL-WRONG-A sum\n",
                                 "  - text: The SENTINEL-WRONG-A sum\n    correct: true\n"))
    result = ddpdrill("bank", "check", bank_dir)
    assert result.exit_code == 1
    assert "basics/fixture-single.yaml" in result.stderr
    assert "[verify.expect[0].rules_out]: expect[0] ('mean on every rank') rules out choice a" in _flat(
        result.stderr)
