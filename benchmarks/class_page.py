"""The class page for a large class through HTTP against a running server, on SQLite and
PostgreSQL.

Builds a generated bank of 40 topics of 5 questions, and a class of 200 learner accounts, each
with FSRS review cards on half the bank (reviewed a few times over the past 60 days) and 150
attempts over the same days, a tenth of them with FSRS weights fitted to them; the class has
8 assignments (six fixed quizzes of 5 questions, a topic quiz, and a mock interview that half
the class sat). Then starts `ddpdrill serve` (no
verify workers) and measures, signed in as the class's instructor:

- the class page, GET /classes/{id} (completion of 200 × 8, the 200 × 40 mastery heatmap, who
  is behind), 100 requests;
- (no target) the CSV of scores, GET /classes/{id}/scores.csv, 30 requests;
- in process, the statements one class report sends (counted on the engine) and the report's
  own time without HTTP or the template.

Target on a 2-core machine: class page p50 <= 100 ms.
Usage: .venv/bin/python benchmarks/class_page.py [--postgresql URL]
(PostgreSQL: the benchmark works in a schema of its own, dropped at the end.)
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _http import JsonClient, on_both_databases, percentile, running_server

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from fsrs import Card, Rating  # noqa: E402
from fsrs.scheduler import DEFAULT_PARAMETERS  # noqa: E402
from itsdangerous import URLSafeTimedSerializer  # noqa: E402
from sqlalchemy import event, insert, select  # noqa: E402

from app.accounts.models import Learner, User  # noqa: E402
from app.accounts.sessions import SESSION_COOKIE  # noqa: E402
from app.classes import class_page  # noqa: E402
from app.classes import service as classes  # noqa: E402
from app.classes.models import (  # noqa: E402
    Assignment,
    AssignmentQuestion,
    AssignmentStart,
    ClassMember,
    Classroom,
)
from app.db import make_engine, make_sessionmaker  # noqa: E402
from app.migrate import upgrade  # noqa: E402
from app.mock.models import MockInterview  # noqa: E402
from app.questions.bank import load_bank  # noqa: E402
from app.questions.models import Question  # noqa: E402
from app.questions.service import import_bank  # noqa: E402
from app.quizzes.models import Attempt, Quiz, QuizItem  # noqa: E402
from app.review.models import LearnerSchedule, ReviewCard  # noqa: E402
from app.review.service import SCHEDULER  # noqa: E402

TOPICS = 40
PER_TOPIC = 5
LEARNERS = 200
ATTEMPTS_EACH = 150
DAYS = 60
TARGET_MS = 100
SECRET = "bench-secret-" + uuid.uuid4().hex


def write_bank(root: Path) -> None:
    for t in range(TOPICS):
        folder = root / f"topic-{t:02d}"
        folder.mkdir(parents=True)
        (folder / "_topic.yaml").write_text(f"title: Topic {t:02d}\ndescription: Generated.\n"
                                            f"position: {t}\n")
        for k in range(PER_TOPIC):
            i = t * PER_TOPIC + k
            (folder / f"q-{i}.yaml").write_text(
                f"slug: q-{i}\ntopic: topic-{t:02d}\ntitle: Generated question {i}\n"
                f"difficulty: {1 + i % 3}\ntype: single\nprompt: Which one, {i}?\n"
                "choices:\n  - text: the first\n    correct: true\n  - text: the second\n"
                "  - text: the third\nexplanation: Because it is generated.\n")


def seed(url: str) -> tuple[int, int]:
    """The generated bank, class and work; returns (instructor id, class id)."""
    upgrade(url)
    bank_dir = Path(tempfile.mkdtemp(prefix="ddpdrill-bench-bank-"))
    write_bank(bank_dir)
    bank = load_bank(bank_dir)
    assert bank.ok, bank.errors[:3]
    engine = make_engine(url)
    factory = make_sessionmaker(engine)
    rng = random.Random(11)
    now = datetime.now(UTC)
    with factory.begin() as s:
        import_bank(db_session=s, bank=bank)
    with factory.begin() as s:
        questions = list(s.execute(select(Question.id, Question.current_revision_id, Question.topic)
                                   .order_by(Question.id)))
        teacher = User(username="ida", password_hash="-", role="instructor", active=True)
        s.add(teacher)
        s.flush()
        classroom = Classroom(name="A large class", instructor_id=teacher.id, join_token="t" * 32)
        s.add(classroom)
        s.flush()
        s.execute(insert(User), [{"username": f"learner{n:03d}", "password_hash": "-",
                                  "role": "learner", "active": True, "session_version": 0,
                                  "created_at": now - timedelta(days=DAYS + 1)}
                                 for n in range(LEARNERS)])
        users = list(s.execute(select(User.id).where(User.role == "learner").order_by(User.id)).scalars())
        learners = [str(uuid.uuid4()) for _ in users]
        s.execute(insert(Learner), [{"id": lid, "user_id": uid, "created_at": now - timedelta(days=DAYS + 1)}
                                    for lid, uid in zip(learners, users, strict=True)])
        s.execute(insert(ClassMember), [
            {"class_id": classroom.id, "user_id": uid, "learner_id": lid, "pseudonym": f"L-{n:010X}",
             "joined_at": now - timedelta(days=DAYS + 1)}
            for n, (uid, lid) in enumerate(zip(users, learners, strict=True))])
        # Six quizzes of five fixed questions, a topic quiz, and a mock, spread over the days.
        assignments = []
        for k in range(8):
            opens = now - timedelta(days=DAYS - k * 7)
            kind = "mock" if k == 7 else "quiz"
            topics = [f"topic-{k:02d}", f"topic-{k + 1:02d}"] if k == 6 else []
            a = Assignment(class_id=classroom.id, kind=kind, title=f"Week {k + 1}", topics=topics,
                           required=1 if kind == "mock" else 5, minutes=25 if kind == "mock" else None,
                           opens_at=opens, due_at=opens + timedelta(days=7))
            s.add(a)
            s.flush()
            assignments.append(a)
            if kind == "quiz":
                pool = (questions[k * 10: k * 10 + 10] if topics
                        else rng.sample(questions, PER_TOPIC))
                s.execute(insert(AssignmentQuestion), [
                    {"assignment_id": a.id, "question_id": q[0], "position": p, "variant": None}
                    for p, q in enumerate(pool, start=1)])
        cards, attempts = [], []
        for lid in learners:
            for qid, _rev, _topic in rng.sample(questions, len(questions) // 2):
                at = now - timedelta(days=rng.uniform(2, DAYS))
                card = Card(card_id=qid, due=at)
                for _ in range(rng.randint(1, 3)):
                    card, _log = SCHEDULER.review_card(
                        card, rng.choice([Rating.Again, Rating.Good, Rating.Good, Rating.Easy]),
                        review_datetime=at)
                    at = min(now, max(at, card.due) + timedelta(hours=rng.uniform(0, 48)))
                cards.append({"learner_id": lid, "question_id": qid, "card": card.to_dict(),
                              "due": card.due, "reps": 2, "last_review": card.last_review})
            for _ in range(ATTEMPTS_EACH):
                qid, rev, _topic = rng.choice(questions)
                correct = rng.random() < 0.7
                attempts.append({"learner_id": lid, "question_id": qid, "revision_id": rev,
                                 "answer": "a" if correct else "b", "score": 1.0 if correct else 0.0,
                                 "correct": correct, "time_taken_ms": 30_000, "confidence": None,
                                 "created_at": now - timedelta(days=rng.uniform(0, DAYS))})
        s.execute(insert(ReviewCard), cards)
        s.execute(insert(Attempt), attempts)
        # A tenth of the class has FSRS weights fitted to them: their own forgetting curve.
        fitted = list(DEFAULT_PARAMETERS)
        fitted[20] = 0.3
        s.execute(insert(LearnerSchedule), [{"learner_id": lid, "parameters": fitted,
                                            "desired_retention": 0.9, "updated_at": now}
                                           for lid in learners[: LEARNERS // 10]])
        mock = assignments[-1]
        for lid in learners[: LEARNERS // 2]:
            started = mock.opens_at + timedelta(days=rng.uniform(0, 6))
            quiz = Quiz(id=str(uuid.uuid4()), learner_id=lid, kind="mock", topics=[], difficulty=None,
                        started_at=started, finished_at=started + timedelta(minutes=20))
            s.add(quiz)
            s.flush()
            s.add(MockInterview(quiz_id=quiz.id, learner_id=lid, minutes=25, started_at=started,
                                deadline=started + timedelta(minutes=25),
                                finished_at=started + timedelta(minutes=20)))
            s.add(AssignmentStart(assignment_id=mock.id, learner_id=lid, quiz_id=quiz.id,
                                  started_at=started))
            s.flush()
            for p, (qid, rev, _topic) in enumerate(rng.sample(questions, 10), start=1):
                item = QuizItem(quiz_id=quiz.id, position=p, question_id=qid, revision_id=rev)
                s.add(item)
                s.flush()
                if p <= 8:
                    s.add(Attempt(learner_id=lid, question_id=qid, revision_id=rev, quiz_item_id=item.id,
                                  answer="a", score=1.0 if p % 3 else 0.0, correct=bool(p % 3),
                                  time_taken_ms=60_000, created_at=started + timedelta(minutes=p)))
        ids = (teacher.id, classroom.id)
    if engine.dialect.name == "postgresql":
        # What autovacuum does to tables this size on a running server: without statistics the
        # planner takes every table for one row.
        with engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("ANALYZE")
    engine.dispose()
    return ids


def statements_of_one_report(url: str, class_id: int) -> tuple[int, float]:
    """How many statements one class report sends, and its time in process (ms, best of 5)."""
    engine = make_engine(url)
    factory = make_sessionmaker(engine)
    sent = []

    @event.listens_for(engine, "before_cursor_execute")
    def count(*_args: Any) -> None:
        sent.append(1)

    best = float("inf")
    n = 0
    for _ in range(5):
        with factory() as s:
            classroom = classes.get_class(db_session=s, class_id=class_id)
            assert classroom is not None
            sent.clear()
            t0 = time.perf_counter()
            report = class_page.class_report(db_session=s, classroom=classroom, now=datetime.now(UTC))
            best = min(best, (time.perf_counter() - t0) * 1000)
            n = len(sent)
            assert len(report.members) == LEARNERS and len(report.topics) == TOPICS
    engine.dispose()
    return n, best


def server_cpu_s(port: int) -> float:
    """CPU seconds (user + system) the `ddpdrill serve` listening on `port` has used: a figure
    that other work on a busy machine moves far less than wall-clock latency."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
            if b"serve" in args and str(port).encode() in args:
                fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
                return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except OSError:
            continue
    raise RuntimeError("the server's process was not found")


def timed(fn, n: int) -> list[float]:  # type: ignore[no-untyped-def]
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def run(url: str, label: str) -> bool:
    t0 = time.perf_counter()
    teacher_id, class_id = seed(url)
    print(f"[{label}] seeded {LEARNERS} learners, {TOPICS * PER_TOPIC} questions in {TOPICS} topics, "
          f"{LEARNERS * TOPICS * PER_TOPIC // 2} cards, {LEARNERS * ATTEMPTS_EACH} attempts, "
          f"8 assignments in {time.perf_counter() - t0:.1f} s")
    statements, in_process = statements_of_one_report(url, class_id)
    tmp = Path(tempfile.mkdtemp(prefix="ddpdrill-bench-"))
    env: dict[str, str | None] = {
        "DDPDRILL_DATA_DIR": str(tmp / "data"), "DDPDRILL_DATABASE_URL": url,
        "DDPDRILL_WORKERS": "0", "DDPDRILL_SECRET_KEY": SECRET,
        "DDPDRILL_LOAD_BANK_ON_START": "false"}
    session = URLSafeTimedSerializer(SECRET, salt="session").dumps({"u": teacher_id, "v": 0})
    with running_server(env) as port:
        client = JsonClient(port, f"{SESSION_COOKIE}={session}")

        def class_page() -> None:
            status, body = client.request_raw("GET", f"/classes/{class_id}")
            # A cell per member and topic (in each round's drill-down), and per member and round.
            assert status == 200 and body.count(b"<td class=m") >= LEARNERS * TOPICS, status

        def scores() -> None:
            status, body = client.request_raw("GET", f"/classes/{class_id}/scores.csv")
            assert status == 200 and body.count(b"\r\n") == LEARNERS + 1, status

        timed(class_page, 5)  # warm up: the first requests pay for imports and templates
        cpu0 = server_cpu_s(port)
        page = timed(class_page, 100)
        cpu_ms = (server_cpu_s(port) - cpu0) * 1000 / len(page)
        csv_times = timed(scores, 30)
    load = os.getloadavg()[0]
    p50, p99 = percentile(page, 50), percentile(page, 99)
    print(f"[{label}] class page GET /classes/{{id}} ({LEARNERS} learners x {TOPICS} topics, "
          f"8 assignments): p50 {p50:.1f} ms, p99 {p99:.1f} ms (n={len(page)}); "
          f"p50 / target {TARGET_MS} ms = {p50 / TARGET_MS:.2f}")
    print(f"[{label}] (no target) the web process's CPU per class page: {cpu_ms:.1f} ms "
          f"(the database's own is {'in it' if label == 'sqlite' else 'not'}); load average "
          f"{load:.1f}")
    print(f"[{label}] (no target) scores CSV: p50 {percentile(csv_times, 50):.1f} ms "
          f"(n={len(csv_times)}); one class report in process: {statements} statements, "
          f"{in_process:.1f} ms")
    return p50 <= TARGET_MS


def main() -> int:
    return on_both_databases(run, __doc__.split("\n")[0])


if __name__ == "__main__":
    raise SystemExit(main())
