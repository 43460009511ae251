"""The learner's pages through HTTP against a running server, on SQLite and PostgreSQL.

Builds a generated bank of 300 questions in 6 topics and a learner with 300 FSRS review
cards (each reviewed a few times over the past 120 days, so some are due) and 5,000 attempts
over the same days, with an interview date 30 days ahead (so the dashboard computes the
forecast and its day-by-day plan). Then starts `ddpdrill serve` (no verify workers) and measures:

- the dashboard page, GET /dashboard (HTML: today, the topic table, every chart), 100 requests;
- the Review page, GET /review (the most overdue card with its answer form), 200 requests;
- (no target) the forecast's day-by-day plan, GET /dashboard/plan, which the dashboard
  loads after itself because it simulates FSRS forward for 30 days;
- a mock-interview answer, POST /api/v1/mock-interviews/{id}/answers, 200 answers (a new
  interview is started, untimed, whenever one runs out of questions).

Targets on a 2-core machine: dashboard p50 <= 50 ms, review p50 <= 30 ms, mock answer p50 <= 30 ms.
Usage: .venv/bin/python benchmarks/learner_pages.py [--postgresql URL]
(PostgreSQL: the benchmark works in a schema of its own, dropped at the end.)
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from _http import JsonClient, on_both_databases, percentile, running_server

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from fsrs import Card, Rating  # noqa: E402
from sqlalchemy import insert, select  # noqa: E402

from app.accounts.models import Learner  # noqa: E402
from app.db import make_engine, make_sessionmaker  # noqa: E402
from app.identity import LEARNER_COOKIE, signed_learner  # noqa: E402
from app.migrate import upgrade  # noqa: E402
from app.progress.models import LearnerGoal  # noqa: E402
from app.questions.bank import load_bank  # noqa: E402
from app.questions.models import Question  # noqa: E402
from app.questions.service import import_bank  # noqa: E402
from app.quizzes.models import Attempt  # noqa: E402
from app.review.models import ReviewCard  # noqa: E402
from app.review.service import SCHEDULER  # noqa: E402

TOPICS = 6
QUESTIONS = 300
ATTEMPTS = 5000
DAYS = 120
SECRET = "bench-secret-" + uuid.uuid4().hex


def write_bank(root: Path) -> None:
    for t in range(TOPICS):
        folder = root / f"topic-{t}"
        folder.mkdir(parents=True)
        (folder / "_topic.yaml").write_text(f"title: Topic {t}\ndescription: Generated.\n")
    for i in range(QUESTIONS):
        t = i % TOPICS
        (root / f"topic-{t}" / f"q-{i}.yaml").write_text(
            f"slug: q-{i}\ntopic: topic-{t}\ntitle: Generated question {i}\n"
            f"difficulty: {1 + i % 3}\ntype: single\nprompt: Which one, {i}?\n"
            "choices:\n  - text: the first\n    correct: true\n  - text: the second\n"
            "  - text: the third\nexplanation: Because it is generated.\n")


def seed(url: str, learner: str) -> None:
    upgrade(url)
    bank_dir = Path(tempfile.mkdtemp(prefix="ddpdrill-bench-bank-"))
    write_bank(bank_dir)
    bank = load_bank(bank_dir)
    assert bank.ok, bank.errors[:3]
    engine = make_engine(url)
    factory = make_sessionmaker(engine)
    rng = random.Random(7)
    now = datetime.now(UTC)
    with factory.begin() as s:
        import_bank(db_session=s, bank=bank)
    with factory.begin() as s:
        questions = list(s.execute(select(Question.id, Question.current_revision_id)))
        s.add(Learner(id=learner))
        s.flush()
        cards = []
        for qid, _rev in questions:
            at = now - timedelta(days=rng.uniform(5, DAYS))
            card = Card(card_id=qid, due=at)
            for _ in range(rng.randint(1, 4)):
                card, _log = SCHEDULER.review_card(
                    card, rng.choice([Rating.Again, Rating.Good, Rating.Good, Rating.Easy]),
                    review_datetime=at)
                at = min(now, max(at, card.due) + timedelta(hours=rng.uniform(0, 48)))
            cards.append({"learner_id": learner, "question_id": qid, "card": card.to_dict(),
                          "due": card.due, "reps": 3, "last_review": card.last_review})
        s.execute(insert(ReviewCard), cards)
        attempts = []
        for _ in range(ATTEMPTS):
            qid, rev = rng.choice(questions)
            correct = rng.random() < 0.7
            attempts.append({"learner_id": learner, "question_id": qid, "revision_id": rev,
                             "answer": "a" if correct else "b", "score": 1.0 if correct else 0.0,
                             "correct": correct, "time_taken_ms": rng.randint(5_000, 90_000),
                             "confidence": rng.choice([None, "guessing", "unsure", "sure"]),
                             "created_at": now - timedelta(days=rng.uniform(0, DAYS))})
        s.execute(insert(Attempt), attempts)
        s.add(LearnerGoal(learner_id=learner, interview_date=(now + timedelta(days=30)).date(),
                          target=0.9))
    engine.dispose()


def timed(fn, n: int) -> list[float]:  # type: ignore[no-untyped-def]
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def run(url: str, label: str) -> bool:
    learner = str(uuid.uuid4())
    t0 = time.perf_counter()
    seed(url, learner)
    print(f"[{label}] seeded 300 questions, 300 cards, 5000 attempts in "
          f"{time.perf_counter() - t0:.1f} s")
    tmp = Path(tempfile.mkdtemp(prefix="ddpdrill-bench-"))
    env: dict[str, str | None] = {
        "DDPDRILL_DATA_DIR": str(tmp / "data"), "DDPDRILL_DATABASE_URL": url,
        "DDPDRILL_WORKERS": "0", "DDPDRILL_SECRET_KEY": SECRET,
        "DDPDRILL_LOAD_BANK_ON_START": "false"}
    cookie = f"{LEARNER_COOKIE}={signed_learner(SECRET, learner)}"
    with running_server(env) as port:
        client = JsonClient(port, cookie)

        def dashboard() -> None:
            status, body = client.request_raw("GET", "/dashboard")
            assert status == 200 and b'id="rounds"' in body and b'topics-progress' in body, status

        def review_page() -> None:
            status, body = client.request_raw("GET", "/review")
            assert status == 200 and b"answer-form" in body, status

        state: dict[str, object] = {"mock": None, "left": []}

        def new_mock() -> None:
            status, body = client.request_raw("POST", "/api/v1/mock-interviews", {"minutes": 45})
            assert status == 201, (status, body[:200])
            m = json.loads(body)
            state["mock"], state["left"] = m["id"], [i["position"] for i in m["items"]]

        def mock_answer() -> None:
            position = state["left"].pop(0)  # type: ignore[attr-defined]
            status, body = client.request_raw("POST", f"/api/v1/mock-interviews/{state['mock']}/answers",
                                          {"position": position, "answer": "a",
                                           "confidence": "sure"})
            assert status == 201, (status, body[:200])

        def plan() -> None:
            status, body = client.request_raw("GET", "/dashboard/plan")
            assert status == 200 and b'class="plan"' in body, status

        for fn in (dashboard, review_page):  # warm up: first requests pay for imports
            timed(fn, 5)
        dash = timed(dashboard, 100)
        rev = timed(review_page, 200)
        plans = timed(plan, 30)
        answers: list[float] = []
        while len(answers) < 200:
            if not state["left"]:
                new_mock()
            answers.extend(timed(mock_answer, 1))
    ok = True
    for name, values, target in (("dashboard GET /dashboard", dash, 50),
                                 ("review page GET /review", rev, 30),
                                 ("mock answer POST .../answers", answers, 30)):
        p50, p99 = percentile(values, 50), percentile(values, 99)
        ok &= p50 <= target
        print(f"[{label}] {name}: p50 {p50:.1f} ms, p99 {p99:.1f} ms (n={len(values)}); "
              f"p50 / target {target} ms = {p50 / target:.2f}")
    print(f"[{label}] (no target) the 30-day plan the dashboard loads after itself, "
          f"GET /dashboard/plan: p50 {percentile(plans, 50):.1f} ms (n={len(plans)})")
    return ok


def main() -> int:
    return on_both_databases(run, __doc__.split("\n")[0])


if __name__ == "__main__":
    raise SystemExit(main())
