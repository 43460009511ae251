"""Fitting one learner's FSRS weights, and what a fit buys, on logs made by a known FSRS model.

1. Speed. A 2,000-review log of a learner whose memory follows FSRS with known weights (the
   fast forgetter of tests/factories.py), fitted as the fit worker does it:
   - fitting.fit in this process: the Optimizer's fit, the optimal retention, both timed;
   - the whole background job on SQLite: FitWorker.run_once (claim, read the log, a spawned
     child that imports torch and fits, store the weights, reschedule every card);
   - the parts of a request that depend on the log's size: the schedule page's 30-day
     workload simulation and counting the reviews that count, and saving a new desired
     retention (which replays every card's log).
   Target: <= 10 s for the fit of 2,000 reviews, in the background.
2. Quality against the number of reviews (--quality): fits on logs of 600 to 4,000 reviews,
   scored on a held-out log of the same learner: mean |log(interval / true interval)| and
   the log loss of predicted recall, against the defaults and the true weights.

Usage: .venv/bin/python benchmarks/fsrs_fit.py [--quality]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from fsrs.scheduler import DEFAULT_PARAMETERS  # noqa: E402

from app.db import make_engine, make_sessionmaker, session_scope  # noqa: E402
from app.migrate import upgrade  # noqa: E402
from app.review import fitting  # noqa: E402
from app.review import service as review  # noqa: E402
from app.review.worker import FitWorker  # noqa: E402
from app.settings import Settings  # noqa: E402
from tests.factories import (  # noqa: E402
    FAST_FORGETTER,
    T0,
    interval_error,
    seed_review_log,
    synthetic_reviews,
)


def _reviews(logs: list) -> list[fitting.Review]:  # type: ignore[type-arg]
    return [fitting.Review(g.card_id, int(g.rating), g.review_datetime, g.review_duration)
            for g in logs]


def clock(fn):  # type: ignore[no-untyped-def]
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def speed() -> None:
    logs = synthetic_reviews(FAST_FORGETTER, cards=160, reviews=2000, seed=1)
    reviews = _reviews(logs)
    print(f"A log of {len(logs)} reviews of 160 cards, {fitting.eligible_reviews(reviews)} that count.")
    import torch
    from fsrs import Optimizer

    torch.set_num_threads(1)
    from fsrs import ReviewLog

    fsrs_logs = [ReviewLog(r.card_id, r.rating, r.reviewed_at, r.duration_ms) for r in reviews]  # type: ignore[arg-type]
    params, wall, cpu = clock(lambda: Optimizer(fsrs_logs).compute_optimal_parameters())
    print(f"  Optimizer.compute_optimal_parameters      {wall:6.2f} s wall  {cpu:6.2f} s CPU   (target 10 s)")
    _, wall, cpu = clock(lambda: Optimizer(fsrs_logs).compute_optimal_retention(params))
    print(f"  Optimizer.compute_optimal_retention        {wall:6.2f} s wall  {cpu:6.2f} s CPU")
    result, wall, cpu = clock(lambda: fitting.fit(reviews))
    print(f"  fitting.fit (both, and the log losses)    {wall:6.2f} s wall  {cpu:6.2f} s CPU   "
          f"kept: {result.parameters is not None}, optimal retention {result.optimal_retention}")

    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'fit.db'}"
        upgrade(url)
        engine = make_engine(url)
        factory = make_sessionmaker(engine)
        learner = str(uuid.uuid4())
        seed_review_log(factory, learner, logs)
        settings = Settings(database_url=url, data_dir=Path(tmp), workers=0)
        with session_scope(factory) as s:
            review._queue_fit(s, learner, "asked", T0)
        worker = FitWorker(factory, settings)
        ok, wall, cpu = clock(worker.run_once)
        assert ok and worker.completed == 1
        print(f"  the background job (FitWorker.run_once)   {wall:6.2f} s wall  {cpu:6.2f} s CPU "
              "in the worker (the child's CPU is not counted)")
        with factory() as s:
            _, wall, cpu = clock(lambda: review.schedule_status(db_session=s, learner_id=learner,
                                                                now=T0))
        print(f"  GET /review/schedule's work (workload)    {wall * 1000:6.0f} ms wall "
              f"{cpu * 1000:6.0f} ms CPU")
        with session_scope(factory) as s:
            _, wall, cpu = clock(lambda: review.set_retention(db_session=s, learner_id=learner,
                                                              retention=0.85, now=T0))
        print(f"  saving a retention (replays every card)   {wall * 1000:6.0f} ms wall "
              f"{cpu * 1000:6.0f} ms CPU")
        engine.dispose()


def quality() -> None:
    held = synthetic_reviews(FAST_FORGETTER, cards=200, reviews=3000, seed=99)
    h = _reviews(held)
    print("Held-out log of 3,000 reviews; interval error = mean |log(interval / true interval)|.")
    print(f"  defaults: interval error {interval_error(DEFAULT_PARAMETERS, held):.3f}, "
          f"log loss {fitting.log_loss(DEFAULT_PARAMETERS, h):.4f}; true weights: log loss "
          f"{fitting.log_loss(FAST_FORGETTER, h):.4f}")
    import torch
    from fsrs import Optimizer, ReviewLog

    torch.set_num_threads(1)
    for total in (600, 900, 1200, 2000, 4000):
        for seed in (1, 2):
            logs = synthetic_reviews(FAST_FORGETTER, cards=max(40, total // 12), reviews=total, seed=seed)
            counted = fitting.eligible_reviews(_reviews(logs))
            p, wall, cpu = clock(lambda logs=logs: Optimizer(
                [ReviewLog(g.card_id, g.rating, g.review_datetime, g.review_duration) for g in logs]
            ).compute_optimal_parameters())
            print(f"  {total:5d} reviews ({counted:4d} count), seed {seed}: interval error "
                  f"{interval_error(p, held):.3f}, log loss {fitting.log_loss(p, h):.4f}  "
                  f"(fit {wall:.1f} s wall, {cpu:.1f} s CPU)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quality", action="store_true", help="also fit logs of 600 to 4,000 reviews")
    args = parser.parse_args()
    speed()
    if args.quality:
        quality()


if __name__ == "__main__":
    main()
