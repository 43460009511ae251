"""The first click is a cache hit: imports queue every published question's audited runs."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import delete, select
from sqlalchemy.orm import Session, sessionmaker

from app.authoring import bankfiles
from app.questions.models import STATUS_PUBLISHED, Question
from app.questions.service import revision_doc
from app.settings import Settings
from app.verify import gate, service
from app.verify.audit import queue_published
from app.verify.models import RUN_QUEUED, Run, Verdict
from app.verify.worker import Worker
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


def test_the_prefills_runs_record_the_gates_verdict_once_they_are_done(
    loaded: None, session_factory: sessionmaker[Session], settings: Settings,
    admin_client: TestClient,
) -> None:
    """Start-up runs are the gate's own: when a worker finishes the last of a revision's, its
    verdict is recorded (as bank verify would), and a prefill that finds every run cached
    records it at once; the author's list then reads "verified", not "unverified"."""
    queue_published(session_factory)
    with session_factory() as s:
        assert s.scalars(select(Verdict)).all() == []
    worker = Worker(session_factory, settings)
    while worker.run_once():
        pass
    with session_factory() as s:
        verdicts = s.scalars(select(Verdict)).all()
        runnable = [q for q in s.scalars(select(Question).where(Question.status == STATUS_PUBLISHED,
                                                                Question.has_snippet.is_(True)))]
        assert {v.revision_id for v in verdicts} == {q.current_revision_id for q in runnable}
        assert all(v.passed and v.torch_version == service.engine_versions()[0] for v in verdicts)
        # Recorded once: another prefill of the same cached runs adds none.
        s.execute(delete(Verdict).where(Verdict.revision_id == runnable[0].current_revision_id))
        s.commit()
    queue_published(session_factory)
    queue_published(session_factory)
    with session_factory() as s:
        assert len(s.scalars(select(Verdict)).all()) == len(verdicts)
    states = {row.select_one("code").get_text(): row.select("td")[4].get_text(strip=True)
              for row in parse(admin_client.get("/author")).select("table.question-table tbody tr")}
    assert {slug: state.split("torch")[0] for slug, state in states.items()
            if state != "no snippet"} == {q.slug: "verified" for q in runnable}
