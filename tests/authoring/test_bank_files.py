"""Import and export from the browser: safe unpacking, the validation report, one transaction."""

from __future__ import annotations

import io
import stat
import zipfile
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.accounts.models import AuditEntry
from app.authoring import bankfiles
from app.authoring.models import BankUpload
from app.questions.bank import load_bank
from app.questions.models import Question, QuestionRevision
from app.questions.service import export_bank
from tests.factories import BROKEN_BANKS, FIXTURE_BANK, count, parse


def zip_folder(folder: Path, prefix: str = "") -> bytes:
    files = {f"{prefix}{p.relative_to(folder).as_posix()}": p.read_bytes()
             for p in sorted(folder.rglob("*")) if p.is_file()}
    return bankfiles.to_zip(files)


def _upload(client: TestClient, **files: Any) -> Any:
    page = parse(client.get("/admin/bank"))
    token = page.select_one("form.upload-form input[name=csrf_token]")["value"]
    return client.post("/admin/bank/upload", data={"csrf_token": token}, files=files)


def _snapshot(session_factory: sessionmaker[Session]) -> list[Any]:
    with session_factory() as s:
        return [*s.execute(select(Question.slug, Question.status, Question.current_revision_id)
                           .order_by(Question.slug)).all(),
                s.scalar(select(QuestionRevision.id).order_by(QuestionRevision.id.desc()).limit(1))]


def test_a_broken_file_gives_a_report_and_changes_nothing(
    admin_client: TestClient, client: TestClient, session_factory: sessionmaker[Session],
    tmp_path: Path,
) -> None:
    before = _snapshot(session_factory)
    bank = tmp_path / "bank"
    import shutil

    shutil.copytree(FIXTURE_BANK, bank)
    shutil.copy(BROKEN_BANKS / "malformed-yaml" / "basics" / "malformed-yaml.yaml", bank / "basics")
    response = _upload(admin_client, archive=("bank.zip", zip_folder(bank, "question_bank/"),
                                              "application/zip"))
    assert response.status_code == 422
    page = parse(response)
    rows = [[td.get_text(strip=True) for td in tr.select("td")]
            for tr in page.select("table.bank-errors tbody tr")]
    assert len(rows) == 1 and rows[0][0] == "basics/malformed-yaml.yaml" and rows[0][1]
    assert "not valid YAML" in rows[0][3]
    assert page.select_one("form.confirm-import") is None
    assert count(session_factory, BankUpload) == 0
    assert _snapshot(session_factory) == before


def test_a_good_zip_is_reported_then_imported_in_one_go(
    admin_client: TestClient, app_client: TestClient, session_factory: sessionmaker[Session],
    tmp_path: Path,
) -> None:
    response = _upload(admin_client, archive=("bank.zip", zip_folder(FIXTURE_BANK, "question_bank/"),
                                              "application/zip"))
    assert response.status_code == 200, response.text
    page = parse(response)
    assert "5 created" in page.get_text()
    # The report is a dry run: nothing is imported yet.
    assert count(session_factory, Question) == 0
    form = page.select_one("form.confirm-import")
    data = {i["name"]: i["value"] for i in form.select("input[type=hidden]")}
    done = admin_client.post(form["action"], data=data)
    assert done.status_code == 200 and "5 created" in done.text
    assert count(session_factory, Question, Question.status == "published") == 5
    assert count(session_factory, BankUpload) == 0
    assert count(session_factory, AuditEntry, AuditEntry.action == "bank.import") == 1
    # Confirming twice does nothing more.
    assert admin_client.post(form["action"], data=data).status_code == 404


def test_a_folder_upload_works_like_a_zip(
    admin_client: TestClient, app_client: TestClient, session_factory: sessionmaker[Session],
) -> None:
    files = [("files", (f"question_bank/{p.relative_to(FIXTURE_BANK).as_posix()}", p.read_bytes()))
             for p in sorted(FIXTURE_BANK.rglob("*")) if p.is_file()]
    files.append(("files", ("question_bank/.DS_Store", b"junk")))
    files.append(("files", ("question_bank/notes.txt", b"hello")))
    page = parse(admin_client.get("/admin/bank"))
    token = page.select_one("form.upload-form input[name=csrf_token]")["value"]
    response = admin_client.post("/admin/bank/upload", data={"csrf_token": token}, files=files)
    assert response.status_code == 200, response.text
    text = parse(response).get_text()
    assert "5 created" in text and "notes.txt" in text


def test_the_downloaded_zip_round_trips_through_load_bank(
    admin_client: TestClient, client: TestClient, session_factory: sessionmaker[Session],
    tmp_path: Path,
) -> None:
    response = admin_client.get("/admin/bank/export.zip")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/zip"
    assert "attachment" in response.headers["content-disposition"]
    with zipfile.ZipFile(io.BytesIO(response.content)) as archive:
        names = sorted(archive.namelist())
        archive.extractall(tmp_path / "out")
    # The layout `ddpdrill bank export` writes.
    assert "basics/_topic.yaml" in names and "basics/fixture-single.yaml" in names
    assert "basics/fixture_single.py" in names and "traces/fixture-trace-join.yaml" in names
    bank = load_bank(tmp_path / "out")
    assert bank.ok, bank.errors
    with session_factory() as s:
        docs, topics = export_bank(db_session=s)
    assert sorted(bank.questions, key=lambda d: d.slug) == sorted(docs, key=lambda d: d.slug)
    assert bank.topics == topics


def _zip(entries: list[tuple[str, bytes, int]]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        for name, content, mode in entries:
            info = zipfile.ZipInfo(name)
            info.external_attr = mode << 16
            archive.writestr(info, content)
    return buf.getvalue()


@pytest.mark.parametrize(("name", "mode", "reason"), [
    ("../evil.yaml", 0o100644, "'..'"),
    ("basics/../../evil.yaml", 0o100644, "'..'"),
    ("/etc/evil.yaml", 0o100644, "absolute"),
    ("C:/evil.yaml", 0o100644, "absolute"),
    ("basics\\evil.yaml", 0o100644, "backslash"),
    ("basics/link.yaml", stat.S_IFLNK | 0o777, "symbolic link"),
])
def test_unsafe_zip_members_are_refused(name: str, mode: int, reason: str) -> None:
    with pytest.raises(bankfiles.UploadError, match=reason):
        bankfiles.files_from_zip(_zip([(name, b"/etc/passwd", mode)]))


def test_uploads_are_capped_in_size_and_count(monkeypatch: pytest.MonkeyPatch) -> None:
    big = _zip([("basics/big.yaml", b"x" * (bankfiles.MAX_UPLOAD_BYTES + 1), 0o100644)])
    with pytest.raises(bankfiles.UploadError, match="MB"):
        bankfiles.files_from_zip(big)
    monkeypatch.setattr(bankfiles, "MAX_UPLOAD_FILES", 3)
    many = _zip([(f"basics/q{i}.yaml", b"x", 0o100644) for i in range(4)])
    with pytest.raises(bankfiles.UploadError, match="more than 3 files"):
        bankfiles.files_from_zip(many)
    with pytest.raises(bankfiles.UploadError, match="not a zip"):
        bankfiles.files_from_zip(b"PK not really")


def test_a_refused_upload_says_why_and_writes_nothing(
    admin_client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    response = _upload(admin_client, archive=("evil.zip", _zip([("../x.yaml", b"a", 0o100644)]),
                                              "application/zip"))
    assert response.status_code == 422
    text = parse(response).get_text()
    assert "Upload refused" in text and "'..'" in text
    assert count(session_factory, BankUpload) == 0
    assert count(session_factory, AuditEntry, AuditEntry.action == "bank.upload_rejected") == 1


def test_wrapper_folders_are_found() -> None:
    files = {"export/question_bank/basics/a.yaml": b"", "export/question_bank/basics/a.py": b""}
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        root = bankfiles.unpack(files, Path(tmp))
        assert root == Path(tmp) / "export" / "question_bank"
