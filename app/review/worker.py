"""The fit worker: claims fits of learners' FSRS weights (schedule_fits) with a lease, runs each
in a child process, stores the result; once an hour it queues the weekly refits.

Like the verify workers (app/verify/worker.py) it is handed ids and opens a short session for
each step. The fit itself runs in a child process, `python -m app.review.fitting`, the log sent
as JSON on stdin and the result read back from stdout and checked: the Optimizer is seconds
of pure-Python work on torch scalars, which in a thread of the web process would hold the GIL
against every request, and torch is then loaded only while a fit runs. A plain command rather
than multiprocessing: a spawned child re-imports the parent's main script, whatever it is.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from datetime import datetime

from sqlalchemy.orm import Session, sessionmaker

from app.clock import Clock
from app.db import read_sessionmaker, session_scope
from app.review import fitting
from app.review import service as review
from app.settings import Settings

log = logging.getLogger("ddpdrill.fits")

# How often an idle fit worker looks for a queued fit (a read). A fit is seconds of work
# that nobody waits for, so a few seconds' delay costs nothing.
POLL_SECONDS = 2.0
# How often each process looks for learners due their weekly refit.
SWEEP_SECONDS = 3600.0
# A fit running longer than this is stopped and counted as a failed attempt: a fit of a
# learner's thousands of reviews takes seconds, and the Optimizer reads at most 64 per card.
FIT_TIMEOUT_S = 300.0
# What the child may print on stderr that is kept as the failure's reason.
MAX_CHILD_STDERR = 2000


class FitFailed(Exception):
    """The fitting process died or ran past FIT_TIMEOUT_S."""


class FitWorker:
    """One fit loop (a thread of `serve` or `ddpdrill worker`); several may share a database."""

    def __init__(self, factory: sessionmaker[Session], settings: Settings, *,
                 stop: threading.Event | None = None, worker_id: str | None = None,
                 timeout_s: float = FIT_TIMEOUT_S, clock: Clock | None = None) -> None:
        self.factory = factory
        self.read_factory = read_sessionmaker(factory.kw["bind"])
        self.settings = settings
        self.stop = stop or threading.Event()
        self.worker_id = worker_id or f"fit:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.timeout_s = timeout_s
        # The learning loop's one clock (app/clock.py): when a fit is dated and refits fall due.
        self.clock = clock or Clock(settings.clock_offset_file)
        self.completed = 0
        self.current_fit_id: int | None = None
        self._next_sweep = 0.0
        self._thread: threading.Thread | None = None

    def sweep(self, now: datetime | None = None) -> int:
        """Queue the weekly refits that are due; how many."""
        with session_scope(self.factory) as s:
            return review.queue_weekly_refits(db_session=s, now=now or self.clock.now())

    def _fit(self, fit_id: int, reviews: list[fitting.Review]) -> fitting.FitResult:
        """fitting.fit in a child process, renewing the lease while it works."""
        interval = max(0.1, self.settings.lease_seconds / 3)
        deadline = time.monotonic() + self.timeout_s
        child = subprocess.Popen([sys.executable, "-m", "app.review.fitting"], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        message: str | None = fitting.reviews_to_json(reviews)
        try:
            while True:
                try:
                    out, err = child.communicate(message, timeout=interval)
                    break
                except subprocess.TimeoutExpired:
                    message = None  # sent once; communicate() keeps what it has read
                if time.monotonic() > deadline:
                    raise FitFailed(f"the fit ran past {self.timeout_s:.0f} s")
                with session_scope(self.factory) as s:
                    if not review.renew_fit_lease(db_session=s, fit_id=fit_id,
                                                  worker_id=self.worker_id,
                                                  lease_seconds=self.settings.lease_seconds):
                        raise FitFailed("the lease passed to another worker")
        finally:
            if child.poll() is None:
                child.kill()
                child.communicate()
        if child.returncode != 0:
            raise FitFailed(f"the fitting process exited with {child.returncode}: "
                            f"{err.strip()[-MAX_CHILD_STDERR:]}")
        return fitting.result_from_json(out)

    def run_once(self) -> bool:
        """Claim and run one fit; False when none was waiting."""
        with session_scope(self.read_factory) as s:
            if not review.has_claimable_fit(db_session=s):
                return False
        with session_scope(self.factory) as s:
            fit = review.claim_fit(db_session=s, worker_id=self.worker_id,
                                   lease_seconds=self.settings.lease_seconds)
            if fit is None:
                return False
            fit_id, learner_id = fit.id, fit.learner_id
        self.current_fit_id = fit_id
        try:
            with session_scope(self.read_factory) as s:
                reviews = review.learner_reviews(db_session=s, learner_id=learner_id)
            try:
                result = self._fit(fit_id, reviews)
            except Exception as exc:
                log.warning("fit %s for learner %s failed: %s", fit_id, learner_id[:8], exc)
                with session_scope(self.factory) as s:
                    review.fail_fit(db_session=s, fit_id=fit_id, worker_id=self.worker_id,
                                    reason=f"{type(exc).__name__}: {exc}")
                return True
            with session_scope(self.factory) as s:
                if review.complete_fit(db_session=s, fit_id=fit_id, worker_id=self.worker_id,
                                       result=result, now=self.clock.now()):
                    self.completed += 1
                else:
                    log.warning("fit %s finished after its lease passed to another worker", fit_id)
        finally:
            self.current_fit_id = None
        return True

    def loop(self) -> None:
        """Work until `stop` is set: sweep once an hour, run fits as they come."""
        while not self.stop.is_set():
            try:
                if time.monotonic() >= self._next_sweep:
                    self._next_sweep = time.monotonic() + SWEEP_SECONDS
                    self.sweep()
                worked = self.run_once()
            except Exception:
                log.exception("fit worker %s: a step failed", self.worker_id)
                worked = False
            if not worked:
                self.stop.wait(POLL_SECONDS)

    def start(self) -> None:
        self._thread = threading.Thread(target=self.loop, name="fit-worker", daemon=True)
        self._thread.start()

    def shutdown(self, timeout: float | None = None) -> None:
        """Stop after the fit in hand; one still going after `timeout` is given back."""
        self.stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        if self.current_fit_id is not None:
            with session_scope(self.factory) as s:
                review.release_fit(db_session=s, fit_id=self.current_fit_id,
                                   worker_id=self.worker_id)
