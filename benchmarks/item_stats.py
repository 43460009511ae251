"""Item statistics on a bank with 100,000 attempts, on SQLite (and PostgreSQL with --postgresql).

Builds 200 single-choice questions in 4 topics and 2,084 learners who each answer 40 of them
(a first attempt, and a second look at every fifth one: 100,032 attempts in all, with times
and confidences), then times what the author pages cost:

- one question's statistics (app/stats/service.py: item_stats(question_id=...)), the work of
  /author/stats/{slug}, over 30 questions;
- the whole bank's (item_stats()), the work of /author/stats and of the inbox's flags, 5 times;
- both pages through the app in-process (FastAPI's TestClient, an admin signed in), so the
  template and the sort are counted too.

Targets (a 2-core machine): a question's page <= 100 ms, the bank <= 1 s.
Usage: .venv/bin/python benchmarks/item_stats.py [--postgresql URL]
(PostgreSQL: the benchmark works in a schema of its own, dropped at the end.)
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from _http import scratch_schema

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from fastapi.testclient import TestClient  # noqa: E402
from sqlalchemy import insert, select, text  # noqa: E402

from app.accounts import service as accounts  # noqa: E402
from app.accounts.models import Learner  # noqa: E402
from app.db import make_engine, make_sessionmaker, session_scope  # noqa: E402
from app.main import create_app  # noqa: E402
from app.migrate import upgrade  # noqa: E402
from app.questions.models import STATUS_PUBLISHED, Question, QuestionRevision, Topic  # noqa: E402
from app.quizzes.models import Attempt  # noqa: E402
from app.settings import Settings  # noqa: E402
from app.stats import service as stats  # noqa: E402
from tests.factories import login  # noqa: E402

QUESTIONS = 200
TOPICS = 4
LEARNERS = 2_084
PER_LEARNER = 40  # first attempts each; every fifth gets a second look
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def build(url: str) -> None:
    """The bank and the attempts, written with bulk inserts."""
    rng = random.Random(7)
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(insert(Topic), [{"slug": f"t{t}", "title": f"Topic {t}", "description": "",
                                      "position": t, "group": ""} for t in range(TOPICS)])
        for i in range(QUESTIONS):
            content = {"slug": f"q{i}", "topic": f"t{i % TOPICS}", "title": f"Question {i}",
                       "type": "single", "difficulty": 1, "prompt": "?",
                       "choices": [{"key": k, "text": f"choice {k}", "correct": k == "b"}
                                   for k in "abcd"], "explanation": "."}
            qid = conn.execute(insert(Question).returning(Question.id), {
                "slug": f"q{i}", "status": STATUS_PUBLISHED, "topic": f"t{i % TOPICS}",
                "title": f"Question {i}", "difficulty": 1, "type": "single", "tags": [],
                "has_snippet": False, "created_at": T0, "updated_at": T0}).scalar_one()
            rid = conn.execute(insert(QuestionRevision).returning(QuestionRevision.id), {
                "question_id": qid, "number": 1, "content": content, "content_hash": f"h{i}",
                "source": "import", "note": "", "created_at": T0}).scalar_one()
            conn.execute(text("UPDATE questions SET current_revision_id = :r WHERE id = :q"),
                         {"r": rid, "q": qid})
        revisions = dict(conn.execute(select(QuestionRevision.question_id, QuestionRevision.id)).all())
        qids = sorted(revisions)
        learners = [str(uuid.uuid4()) for _ in range(LEARNERS)]
        conn.execute(insert(Learner), [{"id": lid, "created_at": T0} for lid in learners])
        rows = []
        for n, lid in enumerate(learners):
            ability = rng.random()
            for j, qid in enumerate(rng.sample(qids, PER_LEARNER)):
                hardness = (qid % 10) / 10
                right = rng.random() < 0.2 + 0.7 * (ability > hardness)
                answer = "b" if right else rng.choice("acd")
                at = T0 + timedelta(minutes=n * PER_LEARNER + j)
                base = {"learner_id": lid, "question_id": qid, "revision_id": revisions[qid],
                        "score": 1.0 if right else 0.0, "time_taken_ms": rng.randint(3_000, 90_000),
                        "confidence": rng.choice(["sure", "unsure", "guessing", None])}
                rows.append({**base, "answer": answer, "correct": right, "created_at": at})
                if j % 5 == 0:
                    rows.append({**base, "answer": "b", "correct": True,
                                 "created_at": at + timedelta(days=2)})
        for k in range(0, len(rows), 10_000):
            conn.execute(insert(Attempt), rows[k:k + 10_000])
    # The planner's statistics, as a database that grew to this size would have them.
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("ANALYZE"))
    engine.dispose()


# This process's CPU time beside the wall time: on a shared machine the wall time includes
# waiting for a core; on SQLite (in-process) the CPU time is what the statistics cost.
CPU: list[float] = []


def timed(fn, repeat: int) -> list[float]:  # type: ignore[no-untyped-def]
    out = []
    for _ in range(repeat):
        started, cpu = time.perf_counter(), time.process_time()
        fn()
        out.append((time.perf_counter() - started) * 1000)
        CPU.append((time.process_time() - cpu) * 1000)
    return out


def report(label: str, ms: list[float], target: float) -> None:
    p50, worst = statistics.median(ms), max(ms)
    cpu = statistics.median(CPU[-len(ms):])
    print(f"  {label:<44} p50 {p50:7.1f} ms (CPU {cpu:7.1f} ms)  max {worst:7.1f} ms  "
          f"target {target:.0f} ms  (p50/target {p50 / target:.2f})")


def measure(url: str, label: str) -> None:
    print(f"{label}: building {QUESTIONS} questions, {LEARNERS} learners ...", flush=True)
    started = time.perf_counter()
    upgrade(url)
    build(url)
    engine = make_engine(url)
    factory = make_sessionmaker(engine)
    with factory() as s:
        n = s.scalar(select(text("count(*)")).select_from(Attempt.__table__))
        qids = list(s.scalars(select(Question.id).order_by(Question.id)))
    print(f"  {n} attempts written in {time.perf_counter() - started:.1f} s")
    picked = qids[:: max(1, len(qids) // 30)][:30]
    one: list[float] = []
    for qid in picked:
        with factory() as s:
            one += timed(lambda qid=qid, s=s: stats.item_stats(db_session=s, question_id=qid), 1)
    report("one question (service)", one, 100)
    with factory() as s:
        bank = timed(lambda: stats.item_stats(db_session=s), 5)
        items = stats.item_stats(db_session=s)
    report(f"whole bank (service, {len(items)} items)", bank, 1000)

    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(database_url=url, secret_key="bench-" + uuid.uuid4().hex,
                            data_dir=Path(tmp), workers=0)
        with session_scope(factory) as s:
            accounts.create_user(db_session=s, username="benchadmin", password="x" * 16, role="admin")
        with TestClient(create_app(settings)) as client:
            assert login(client, "benchadmin", "x" * 16).status_code == 303
            slugs = [f"q{(qid - qids[0])}" for qid in picked]
            page = []
            for slug in slugs:
                page += timed(lambda slug=slug: client.get(f"/author/stats/{slug}").raise_for_status(), 1)
            report("GET /author/stats/{slug} (in-process)", page, 100)
            report("GET /author/stats?sort=discrimination",
                   timed(lambda: client.get("/author/stats?sort=discrimination").raise_for_status(), 5),
                   1000)
            report("GET /author/reports (with the flags)",
                   timed(lambda: client.get("/author/reports").raise_for_status(), 5), 1000)
    engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgresql", help="a PostgreSQL URL to run against as well")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        measure(f"sqlite:///{Path(tmp) / 'bench.db'}", "SQLite")
    if args.postgresql:
        with scratch_schema(args.postgresql) as url:
            measure(url, "PostgreSQL")


if __name__ == "__main__":
    main()
