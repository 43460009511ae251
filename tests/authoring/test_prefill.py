"""The first click is a cache hit: imports queue every published question's audited runs."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.authoring import bankfiles
from app.questions.models import STATUS_PUBLISHED, Question
from app.questions.service import revision_doc
from app.verify import gate, service
from app.verify.audit import queue_published
from app.verify.models import RUN_QUEUED, Run
from tests.factories import FIXTURE_BANK, parse


def audited_keys(factory: sessionmaker[Session]) -> set[str]:
    keys = set()
    with factory() as s:
        for q in s.scalars(select(Question).where(Question.status == STATUS_PUBLISHED)).unique():
            for req in gate.plan(revision_doc(q.current_revision), revision_id=q.current_revision_id,
                                 versions=service.engine_versions()):
                keys.add(req.key)
    return keys


def live_keys(factory: sessionmaker[Session]) -> set[str]:
    with factory() as s:
        return set(s.scalars(select(Run.cache_key).where(Run.live.is_(True))).all())


def test_queue_published_queues_each_audited_combination_once(
    loaded: None, session_factory: sessionmaker[Session],
) -> None:
    expected = audited_keys(session_factory)
    assert expected
    assert queue_published(session_factory) == len(expected)
    assert live_keys(session_factory) == expected
    assert queue_published(session_factory) == len(expected)  # reused, not queued again
    with session_factory() as s:
        assert len(s.scalars(select(Run.id)).all()) == len(expected)
        assert set(s.scalars(select(Run.status)).all()) == {RUN_QUEUED}


def test_an_admin_import_queues_the_audited_runs_for_the_workers(
    admin_client: TestClient, session_factory: sessionmaker[Session],
) -> None:
    files = {p.relative_to(FIXTURE_BANK).as_posix(): p.read_bytes()
             for p in sorted(FIXTURE_BANK.rglob("*")) if p.is_file()}
    page = parse(admin_client.get("/admin/bank"))
    token = page.select_one("form.upload-form input[name=csrf_token]")["value"]
    report = parse(admin_client.post("/admin/bank/upload", data={"csrf_token": token},
                                     files={"archive": ("bank.zip", bankfiles.to_zip(files))}))
    confirm = report.select_one("form.confirm-import")
    fields = {i["name"]: i.get("value", "") for i in confirm.select("input[type=hidden]")}
    assert admin_client.post("/admin/bank/import", data=fields).status_code == 200
    # TestClient runs the response's background tasks before returning.
    assert live_keys(session_factory) == audited_keys(session_factory) != set()
