"""Fitting a learner's FSRS parameters from their review log, and simulating their workload.

Pure functions over plain data (no database, no web): the fit runs in a child process of
the fit worker (app/review/worker.py: `python -m app.review.fitting`, the log as JSON on
stdin, the result as JSON on stdout), the workload simulation in a request. The fit is the
`fsrs` package's own Optimizer (the `fsrs[optimizer]` extra: torch, pandas, tqdm), imported
only where a fit runs, so no web process loads torch for it.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import random
import statistics
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from fsrs import Card, Rating, ReviewLog, Scheduler
from fsrs.scheduler import DEFAULT_PARAMETERS

# The Optimizer learns only from reviews a day or more after the card's previous one, and
# only from each card's first 64 reviews (fsrs/optimizer.py: max_seq_len); below one
# mini-batch of such reviews (its mini_batch_size, 512) it returns the defaults unchanged.
# So a fit is worth running from this many; docs/review.md shows what a fit buys near it.
MIN_FIT_REVIEWS = 512
MAX_SEQ_LEN = 64
# A review this long is an answer left open in a tab, not the time it took: the optimal
# retention weighs reviews by their duration, so one such review would outweigh hundreds.
MAX_DURATION_MS = 10 * 60 * 1000
# The package's optimal-retention search needs this many review logs (compute_optimal_retention).
MIN_RETENTION_LOGS = 512
# The retention a learner may choose, and the ones the workload table compares.
MIN_RETENTION, MAX_RETENTION = 0.70, 0.97
RETENTION_CHOICES = (0.70, 0.75, 0.80, 0.85, 0.90, 0.95, 0.97)
# The workload simulation averages this many runs (one random stream per card, shared by
# every retention, so the comparison between retentions is not noise).
WORKLOAD_RUNS = 4
WORKLOAD_SEED = 20260302


@dataclass(frozen=True)
class Review:
    """One row of a learner's review log, as the fit needs it."""

    card_id: int
    rating: int
    reviewed_at: datetime
    duration_ms: int | None


@dataclass
class FitResult:
    parameters: list[float] | None  # None: keep the defaults
    reviews: int
    eligible: int
    fitted_loss: float | None
    default_loss: float | None
    optimal_retention: float | None
    seconds: float
    notes: list[str] = field(default_factory=list)


def _histories(reviews: Iterable[Review]) -> dict[int, list[Review]]:
    by_card: dict[int, list[Review]] = {}
    for r in sorted(reviews, key=lambda r: (r.reviewed_at, r.card_id)):
        by_card.setdefault(r.card_id, []).append(r)
    return by_card


def eligible_reviews(reviews: Iterable[Review]) -> int:
    """How many of these reviews the Optimizer learns from (its own count: a day or more after
    the card's previous review, within the card's first 64)."""
    n = 0
    for seq in _histories(reviews).values():
        seq = seq[:MAX_SEQ_LEN]
        n += sum(1 for a, b in itertools.pairwise(seq)
                 if (b.reviewed_at - a.reviewed_at).days > 0)
    return n


def log_loss(parameters: Sequence[float], reviews: Iterable[Review]) -> float | None:
    """Mean binary cross-entropy of FSRS's predicted recall against what happened (Again is a
    lapse), over the reviews the Optimizer learns from, replaying each card's history."""
    scheduler = Scheduler(parameters=parameters, enable_fuzzing=False)
    total, n = 0.0, 0
    for card_id, seq in _histories(reviews).items():
        card = Card(card_id=card_id, due=seq[0].reviewed_at)
        for r in seq[:MAX_SEQ_LEN]:
            if card.last_review is not None and (r.reviewed_at - card.last_review).days > 0:
                p = min(max(float(scheduler.get_card_retrievability(card, r.reviewed_at)), 1e-9),
                        1 - 1e-9)
                recalled = r.rating != Rating.Again
                total -= math.log(p) if recalled else math.log(1 - p)
                n += 1
            card, _ = scheduler.review_card(card, Rating(r.rating), review_datetime=r.reviewed_at)
    return total / n if n else None


def _with_durations(reviews: list[Review]) -> list[ReviewLog] | None:
    """The log as the package's ReviewLogs, every duration known: the optimal-retention search
    refuses a log with a missing duration, so a missing one is the median of the learner's
    known durations for that rating (capped like the rest); None when none is known."""
    capped = [min(r.duration_ms, MAX_DURATION_MS) for r in reviews if r.duration_ms is not None]
    if not capped:
        return None
    median = statistics.median(capped)
    by_rating = {rating: statistics.median(ds) for rating in (1, 2, 3, 4)
                 if (ds := [min(r.duration_ms, MAX_DURATION_MS) for r in reviews
                            if r.rating == rating and r.duration_ms is not None])}
    return [ReviewLog(card_id=r.card_id, rating=Rating(r.rating), review_datetime=r.reviewed_at,
                      review_duration=int(min(r.duration_ms, MAX_DURATION_MS)
                                          if r.duration_ms is not None
                                          else by_rating.get(r.rating, median)))
            for r in reviews]


def fit(reviews: Sequence[Review]) -> FitResult:
    """Fit FSRS parameters to one learner's log with the package's Optimizer, and the retention
    it computes as optimal for them. The fit is kept only if it predicts the learner's own log
    better (lower log loss) than the default weights do."""
    # Imported here: torch and pandas load only in the process that fits.
    import torch
    from fsrs import Optimizer

    # The Optimizer steps through one review at a time on scalar tensors: more threads
    # only add synchronisation, and this process shares the machine with the web app.
    torch.set_num_threads(1)
    started = time.perf_counter()
    reviews = list(reviews)
    eligible = eligible_reviews(reviews)
    result = FitResult(None, len(reviews), eligible, None, log_loss(DEFAULT_PARAMETERS, reviews),
                       None, 0.0)
    if eligible < MIN_FIT_REVIEWS:
        result.notes.append(f"{eligible} reviews to learn from; a fit needs {MIN_FIT_REVIEWS}")
        result.seconds = time.perf_counter() - started
        return result
    logs = [ReviewLog(card_id=r.card_id, rating=Rating(r.rating), review_datetime=r.reviewed_at,
                      review_duration=r.duration_ms) for r in reviews]
    optimizer = Optimizer(logs)
    parameters = [float(p) for p in optimizer.compute_optimal_parameters()]
    result.fitted_loss = log_loss(parameters, reviews)
    better = (result.fitted_loss is not None and result.default_loss is not None
              and result.fitted_loss < result.default_loss)
    if better:
        result.parameters = parameters
    else:
        result.notes.append("the fitted parameters predicted the log no better than the defaults")
    timed = _with_durations(reviews)
    if timed is not None and len(timed) >= MIN_RETENTION_LOGS:
        try:
            # Annotated as a list in fsrs 6.3, it returns one of its grid's retentions.
            best: Any = Optimizer(timed).compute_optimal_retention(
                result.parameters or list(DEFAULT_PARAMETERS))
            result.optimal_retention = float(best)
        except (ValueError, ZeroDivisionError) as exc:
            # A log with no second review of any card has no recall probabilities to sample.
            result.notes.append(f"no optimal retention: {exc or type(exc).__name__}")
    result.seconds = time.perf_counter() - started
    return result


# The workload: reviews per day over the next days ------------------------------------------


@dataclass(frozen=True)
class Workload:
    retention: float
    per_day: list[float]  # mean reviews on each day, over WORKLOAD_RUNS runs

    @property
    def total(self) -> float:
        return sum(self.per_day)

    @property
    def mean_per_day(self) -> float:
        return self.total / len(self.per_day) if self.per_day else 0.0


def workload(cards: Sequence[Card], *, parameters: Sequence[float], retentions: Sequence[float],
             start: datetime, days: int) -> list[Workload]:
    """Simulate the learner's cards for `days` from `start` under each desired retention: a card
    is reviewed when it falls due, recalled with FSRS's predicted probability (their
    parameters), rated Good when recalled and Again (then relearned the same day) when not.
    New questions are not simulated: how many to start is the learner's choice."""
    out = []
    end = start + timedelta(days=days)
    for retention in retentions:
        scheduler = Scheduler(parameters=parameters, desired_retention=retention,
                              enable_fuzzing=False)
        counts = [0] * days
        for run in range(WORKLOAD_RUNS):
            for card in cards:
                # One stream per card and run, the same for every retention.
                rng = random.Random(f"{WORKLOAD_SEED}:{run}:{card.card_id}")
                c = card
                due = max(c.due, start)
                while due < end:
                    recalled = rng.random() < float(scheduler.get_card_retrievability(c, due))
                    c, _ = scheduler.review_card(c, Rating.Good if recalled else Rating.Again,
                                                 review_datetime=due)
                    counts[(due - start) // timedelta(days=1)] += 1
                    due = c.due
        out.append(Workload(retention, [n / WORKLOAD_RUNS for n in counts]))
    return out


# The child process: the job message and the result as JSON, checked at the boundary ---------

# The child runs at a lower priority than the web process it shares the machine with.
CHILD_NICENESS = 10


def reviews_to_json(reviews: Sequence[Review]) -> str:
    """The job message: the review log, one [card, rating, ISO time, duration] per review."""
    return json.dumps({"reviews": [[r.card_id, r.rating, r.reviewed_at.isoformat(), r.duration_ms]
                                   for r in reviews]})


def reviews_from_json(text: str) -> list[Review]:
    """The job message read back; raises ValueError for anything else."""
    try:
        rows = json.loads(text)["reviews"]
        out = [Review(int(c), int(g), datetime.fromisoformat(at), None if d is None else int(d))
               for c, g, at, d in rows]
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"not a review log: {exc}") from None
    if any(r.rating not in (1, 2, 3, 4) or r.reviewed_at.tzinfo is None for r in out):
        raise ValueError("not a review log: a rating outside 1-4 or a time without a zone")
    return out


def _number(value: object, name: str) -> float | None:
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        raise ValueError(f"{name} is not a finite number")
    return float(value)


def result_from_json(text: str) -> FitResult:
    """A child's result, checked: 21 finite weights within FSRS's bounds (or none), counts and
    losses that are numbers. Raises ValueError for anything else."""
    from fsrs.scheduler import LOWER_BOUNDS_PARAMETERS, UPPER_BOUNDS_PARAMETERS

    try:
        data = json.loads(text)
        params = data["parameters"]
        if params is not None:
            if not isinstance(params, list) or len(params) != len(DEFAULT_PARAMETERS):
                raise ValueError(f"parameters is not a list of {len(DEFAULT_PARAMETERS)}")
            params = [_number(p, "a parameter") for p in params]
            if not all(p is not None and lo <= p <= hi for p, lo, hi in
                       zip(params, LOWER_BOUNDS_PARAMETERS, UPPER_BOUNDS_PARAMETERS, strict=True)):
                raise ValueError("a parameter is outside FSRS's bounds")
        retention = _number(data["optimal_retention"], "optimal_retention")
        if retention is not None and not 0 < retention < 1:
            raise ValueError("optimal_retention is not a probability")
        return FitResult(params, int(data["reviews"]), int(data["eligible"]),
                         _number(data["fitted_loss"], "fitted_loss"),
                         _number(data["default_loss"], "default_loss"), retention,
                         _number(data["seconds"], "seconds") or 0.0,
                         [str(n)[:500] for n in data.get("notes", [])][:10])
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"not a fit result: {exc}") from None


def main() -> None:
    """`python -m app.review.fitting`: read a review log on stdin, write the fit on stdout."""
    # Where lowering the priority is not permitted, the fit runs at the web app's.
    with contextlib.suppress(OSError):
        os.nice(CHILD_NICENESS)
    result = fit(reviews_from_json(sys.stdin.read()))
    json.dump({"parameters": result.parameters, "reviews": result.reviews,
               "eligible": result.eligible, "fitted_loss": result.fitted_loss,
               "default_loss": result.default_loss, "optimal_retention": result.optimal_retention,
               "seconds": result.seconds, "notes": result.notes}, sys.stdout)


if __name__ == "__main__":
    main()
