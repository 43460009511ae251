"""Plain-words diagnosis of a finished run: who failed first and how, and what everyone else was doing.

Pure functions over the per-rank results (no processes, no torch), so every
phrasing can be tested from a hand-written trace as well as from real runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from app.verify.engine.events import MALFORMED_EVENT_TYPE
from app.verify.engine.limits import Limits
from app.verify.engine.result import BlockedIn, LimitName, Outcome, RankError, RankResult

_PEER_GONE = re.compile(
    r"closed by peer|reset by peer|broken pipe|connection refused|ECONNRESET|EPIPE|"
    r"Connection closed|socket closed", re.I)
_GLOO_TIMEOUT = re.compile(r"timed out|timeout", re.I)
_EXHAUSTED = re.compile(r"exhausted all inputs")
_DETECTED = re.compile(r"Detected at least one rank that exhausted inputs")
_MEMORY = re.compile(r"can't allocate memory|cannot allocate memory|bad_alloc|out of memory", re.I)

# Causes that start a failure, as opposed to those that follow from a peer's.
_ROOTS = ("user", "exhausted", "memory", "cpu", "signal", "exit_status")
_FOLLOWERS = ("peer_gone", "gloo_timeout", "early_termination")
_LIMIT_CAUSES: dict[str, LimitName] = {"memory": "memory", "cpu": "cpu"}


@dataclass(frozen=True)
class RunFacts:
    """What the runner knows beyond the ranks' own traces."""

    world_size: int
    limits: Limits
    stop_reason: str | None = None  # "timeout": the runner stopped the run
    stop_ms: float | None = None
    leftovers: int = 0


@dataclass
class Diagnosis:
    outcome: Outcome
    limit: LimitName | None
    text: str
    blocked: dict[int, BlockedIn | None] = field(default_factory=dict)


@dataclass
class _Op:
    op: str
    since_ms: float
    iteration: int | None
    line: int | None
    detail: str | None
    is_async: bool = False
    bucket: bool = False
    error: str | None = None
    end_ms: float | None = None

    def phrase(self) -> str:
        parts = [p for p in (
            self.detail,
            f"iteration {self.iteration}" if self.iteration else None,
            f"line {self.line}" if self.line else None,
        ) if p]
        return f"{self.op} ({', '.join(parts)})" if parts else self.op

    def blocked(self) -> BlockedIn:
        return BlockedIn(op=self.op, since_ms=self.since_ms, iteration=self.iteration,
                         line=self.line, detail=self.detail)


@dataclass
class _Story:
    """One rank's ending, read from its events."""

    rank: int
    finished: bool = False
    end_ms: float | None = None          # snippet_end, exception, or exit
    exit_ms: float | None = None
    exit_code: int | None = None
    signal: str | None = None
    killed: bool = False
    error: RankError | None = None
    error_ms: float | None = None
    cause: str = "ok"
    open_op: _Op | None = None
    failed_op: _Op | None = None
    iterations_done: int = 0
    last_iteration: int | None = None
    uses_ddp: bool = False
    joined_at: int | None = None
    stack_line: int | None = None
    stack_source: str | None = None
    last_words: str | None = None        # the last line the rank wrote to stderr
    op_counts: dict[str, int] = field(default_factory=dict)
    buckets: int = 0
    shadowed: int = 0


def _t(ms: float | None) -> str:
    if ms is None:
        return "an unknown time"
    return f"{ms:.1f} ms" if ms < 1000 else f"{ms / 1000:.2f} s"


def _short(message: str, limit: int = 160) -> str:
    first = message.strip().splitlines()[0] if message.strip() else ""
    # gloo prefixes its errors with the C++ source location: drop it.
    first = re.sub(r"^\[[^\]]*\.(cc|cpp|h):\d+\]\s*", "", first)
    # gloo appends advice ("This is typically caused by ..."): keep the first sentence.
    cut = first.find(". ", 20)
    if cut != -1:
        first = first[:cut]
    first = first.rstrip(". ")
    return first if len(first) <= limit else first[: limit - 1] + "…"


def _op_from(event: dict[str, object]) -> _Op:
    bucket = event["kind"] == "bucket_reduce_start"
    detail = None
    if bucket:
        detail = ("Join shadow of DDP gradient bucket " if event.get("shadow")
                  else "DDP gradient bucket ") + str(event.get("index", 0))
    elif event.get("source") == "torch" and event.get("caller"):
        detail = f"issued by torch's {event['caller']}"
        if event.get("unit") is not None:
            detail += f" for FSDP unit {event['unit']}"
    iteration = event.get("iteration")
    line = event.get("line")
    return _Op(op="all_reduce" if bucket else str(event.get("op", "?")),
               since_ms=float(event["t_ms"]),  # type: ignore[arg-type]
               iteration=iteration if isinstance(iteration, int) else None,
               line=line if isinstance(line, int) else None, detail=detail,
               is_async=bool(event.get("async")), bucket=bucket)


def _classify_error(error: RankError, failed_op: _Op | None) -> str:
    if error.type == MALFORMED_EVENT_TYPE:  # its message quotes the forger's own words
        return "user"
    text = f"{error.type}: {error.message}"
    if _EXHAUSTED.search(text):
        return "exhausted"
    if _DETECTED.search(text):
        return "early_termination"
    if error.type in ("MemoryError",) or _MEMORY.search(text):
        return "memory"
    if failed_op is not None and _PEER_GONE.search(text):
        return "peer_gone"
    if failed_op is not None and _GLOO_TIMEOUT.search(text):
        return "gloo_timeout"
    if error.type == "SystemExit":
        return "exit_status"
    return "user"


def _stack_where(stack: str | None, code_lines: list[str] | None) -> tuple[int | None, str | None]:
    if not stack:
        return None, None
    match = re.search(r'File "snippet\.py", line (\d+)', stack)
    if not match:
        return None, None
    line = int(match.group(1))
    source = None
    if code_lines and 0 < line <= len(code_lines):
        source = code_lines[line - 1].strip()
    return line, source


def _story(rr: RankResult, facts: RunFacts, code_lines: list[str] | None) -> _Story:
    s = _Story(rank=rr.rank, exit_code=rr.exit_code, signal=rr.signal, error=rr.error)
    open_ops: dict[object, _Op] = {}
    malformed_ms: float | None = None
    for e in rr.events:
        kind = e["kind"]
        t = float(e["t_ms"])
        if kind in ("collective_start", "bucket_reduce_start"):
            op = _op_from(e)
            open_ops[e.get("seq")] = op
            s.op_counts[op.op] = s.op_counts.get(op.op, 0) + 1
            if op.bucket:
                if e.get("shadow"):
                    s.shadowed += 1
                else:
                    s.buckets += 1
        elif kind in ("collective_end", "bucket_reduce_end"):
            seq = e.get("seq")
            ended = open_ops.pop(seq) if seq in open_ops else None
            if ended is not None and e.get("error"):
                ended.error = str(e["error"])
                ended.end_ms = t
                s.failed_op = ended
        elif kind == "ddp_init":
            s.uses_ddp = True
        elif kind == "ddp_forward_start" and e.get("grad", True):
            it = e.get("iteration")
            s.last_iteration = it if isinstance(it, int) else s.last_iteration
        elif kind == "ddp_backward_end":
            it = e.get("iteration")
            if isinstance(it, int):
                s.iterations_done = max(s.iterations_done, it)
        elif kind == "join_start":
            it = e.get("iteration")
            s.joined_at = it if isinstance(it, int) else 0
        elif kind == "snippet_end":
            s.finished = True
            s.end_ms = t
        elif kind == "exception":
            s.error_ms = t
            s.end_ms = t
        elif kind == "malformed_event":
            malformed_ms = t
        elif kind == "exit":
            s.exit_ms = t
            s.killed = bool(e.get("killed_by"))
            if s.end_ms is None:
                s.end_ms = t
    # Exit status 0 is a normal end even without snippet_end (the snippet called os._exit(0)),
    # unless the runner found the rank's trace forged (a malformed event).
    s.finished = rr.exit_code == 0 and not s.killed and rr.error is None
    if rr.error is not None and rr.error.type == MALFORMED_EVENT_TYPE and malformed_ms is not None:
        s.error_ms = malformed_ms
        s.end_ms = s.end_ms if s.end_ms is not None else malformed_ms
    pending = list(open_ops.values())
    sync = [o for o in pending if not o.is_async and not o.bucket]
    buckets = [o for o in pending if o.bucket]
    if sync:
        s.open_op = max(sync, key=lambda o: o.since_ms)
    elif buckets:
        s.open_op = min(buckets, key=lambda o: o.since_ms)
    elif pending:
        s.open_op = max(pending, key=lambda o: o.since_ms)
    s.stack_line, s.stack_source = _stack_where(rr.stack, code_lines)

    if s.finished:
        s.cause = "ok"
    elif s.killed:
        s.cause = "killed"
    elif rr.error is not None:
        s.cause = _classify_error(rr.error, s.failed_op)
    elif rr.signal is not None:
        cpu_limit_ms = facts.limits.cpu_seconds * 1000
        if rr.signal == "SIGXCPU" or (rr.signal == "SIGKILL" and (rr.cpu_ms or 0) >= cpu_limit_ms - 50):
            s.cause = "cpu"
        elif _MEMORY.search(rr.stderr):
            s.cause = "memory"
        else:
            s.cause = "signal"
    elif rr.exit_code not in (0, None):
        s.cause = "exit_status"
        # An exit status alone (os._exit, or the harness itself failing) explains nothing;
        # whatever the rank printed last usually does.
        s.last_words = next((line for line in reversed(rr.stderr.splitlines()) if line.strip()),
                            None)
    elif rr.exit_code is None:
        s.cause = "killed" if facts.stop_reason else "signal"
    return s


def _ddp_progress(s: _Story) -> str:
    if not s.uses_ddp:
        return ""
    n = s.iterations_done
    return f" after {n} DDP iteration{'s' if n != 1 else ''}" if n else " before finishing a DDP iteration"


def _doing(s: _Story) -> str:
    """What a rank was doing when the run ended, as a clause after 'Rank N'."""
    if s.finished:
        return f"had finished the snippet{_ddp_progress(s)} at {_t(s.end_ms)} and exited"
    if s.killed:
        if s.open_op is not None:
            return f"was blocked in {s.open_op.phrase()} since {_t(s.open_op.since_ms)}"
        if s.joined_at is not None:
            return (f"had run out of inputs after iteration {s.joined_at} and was waiting in "
                    "Join for the other ranks")
        if s.stack_line is not None:
            verb = "sleeping" if s.stack_source and "sleep(" in s.stack_source else "running"
            src = f" (`{s.stack_source}`)" if s.stack_source else ""
            return f"was {verb} in user code at line {s.stack_line}{src}"
        return "was still running"
    if s.error is not None:
        where = f" (line {s.error.line})" if s.error.line else ""
        return f"raised {s.error.type}: {_short(s.error.message)}{where} at {_t(s.error_ms)}"
    if s.signal:
        return f"was killed by {s.signal} at {_t(s.exit_ms)}"
    return f"exited with status {s.exit_code} at {_t(s.exit_ms)}"


def _root_sentence(s: _Story, facts: RunFacts) -> str:
    err = s.error
    where = f" (line {err.line})" if err is not None and err.line else ""
    if s.cause == "exhausted" and err is not None:
        after = f" after iteration {s.iterations_done}" if s.uses_ddp else ""
        return (f"Rank {s.rank} ran out of inputs{after} and, because Join was asked to "
                f"throw_on_early_termination, raised {err.type}: {_short(err.message)} at "
                f"{_t(s.error_ms)}.")
    if s.cause == "memory":
        gib = facts.limits.memory_bytes / 2**30
        how = (f"{err.type}: {_short(err.message)}{where}" if err is not None
               else f"killed by {s.signal}")
        return (f"Rank {s.rank} failed first: it ran out of memory under the {gib:g} GiB "
                f"address-space limit ({how}) at {_t(s.end_ms)}.")
    if s.cause == "cpu":
        return (f"Rank {s.rank} failed first: it used up its {facts.limits.cpu_seconds:g} s of CPU "
                f"time and was killed by {s.signal} at {_t(s.exit_ms)}.")
    if s.cause == "signal":
        return f"Rank {s.rank} failed first: it died from {s.signal} at {_t(s.exit_ms)}."
    if s.cause == "exit_status":
        said = f"; its last output: {_short(s.last_words, 200)}" if s.last_words else ""
        return (f"Rank {s.rank} failed first: it exited with status {s.exit_code}{where} "
                f"at {_t(s.end_ms)}{said}.")
    assert err is not None
    return (f"Rank {s.rank} failed first: {err.type}: {_short(err.message)}{where} "
            f"at {_t(s.error_ms)}.")


def _follower_sentence(s: _Story, others: list[_Story]) -> str:
    err = s.error
    assert err is not None
    op = s.failed_op
    if s.cause == "early_termination":
        it = f" in iteration {s.last_iteration}" if s.last_iteration else ""
        return (f"Rank {s.rank} raised {err.type}: {_short(err.message)}{it} at "
                f"{_t(s.error_ms)}: Join makes every rank stop once one runs out of inputs.")
    assert op is not None
    if s.cause == "gloo_timeout":
        return (f"Rank {s.rank} was blocked in {op.phrase()} from {_t(op.since_ms)} until gloo "
                f"gave up at {_t(op.end_ms)} ({_short(err.message)}).")
    gone = [o for o in others if o.end_ms is not None
            and (s.error_ms is None or o.end_ms <= s.error_ms + 50)]
    culprit = min(gone, key=lambda o: o.end_ms or 0.0) if gone else None
    because = f", because rank {culprit.rank} had exited" if culprit is not None else ""
    return (f"Rank {s.rank} failed at {_t(s.error_ms)} while blocked in {op.phrase()}, entered "
            f"at {_t(op.since_ms)}{because}: {_short(err.message)}.")


def _mismatch_hint(stories: list[_Story], stuck: list[_Story]) -> str:
    """Why a collective found no partner: different DDP iteration counts, or different calls."""
    ddp = [s for s in stories if s.uses_ddp]
    if len(ddp) == len(stories) and len({s.last_iteration for s in ddp}) > 1:
        counts = ", ".join(f"{s.last_iteration or 0} on rank {s.rank}" for s in ddp)
        if any(s.joined_at is not None for s in ddp):
            # Join was in use, so DDP's own collectives were shadowed: the partner that
            # went missing belongs to something Join does not know about.
            return (f"The ranks ran different numbers of DDP iterations ({counts}) under Join; "
                    "Join shadows only the collectives of the Joinables it was given, so another "
                    "collective (a metric, an optimizer, a barrier) was left without a partner.")
        return (f"The ranks ran different numbers of DDP iterations ({counts}): a rank that stops "
                "early leaves the others' gradient all-reduce without a partner (uneven inputs "
                "without Join).")
    ops = {s.rank: (s.open_op or s.failed_op) for s in stuck}
    names = {o.op for o in ops.values() if o is not None}
    if len(names) > 1:
        listing = ", ".join(f"{o.op} on rank {r}" for r, o in ops.items() if o is not None)
        return f"The ranks were waiting in different collectives ({listing}), which never match."
    if len(names) == 1:
        name = names.pop()
        never = [s.rank for s in stories if not s.op_counts.get(name)]
        if never:
            who = ", ".join(f"rank {r}" for r in never)
            return (f"{who[0].upper()}{who[1:]} never called {name}: a collective completes only "
                    "when every rank of its group calls it.")
        counts = ", ".join(f"{s.op_counts.get(name, 0)} on rank {s.rank}" for s in stories)
        return (f"The ranks called {name} different numbers of times ({counts}); every rank of "
                "a group must make the same collective calls in the same order.")
    return ""


def diagnose(ranks: list[RankResult], facts: RunFacts, code: str | None = None) -> Diagnosis:
    """Outcome, limit hit, plain-words diagnosis and each rank's blocked collective."""
    code_lines = code.splitlines() if code is not None else None
    stories = [_story(rr, facts, code_lines) for rr in ranks]
    blocked: dict[int, BlockedIn | None] = {}
    for s in stories:
        op = None
        if s.killed and s.open_op is not None:
            op = s.open_op
        elif s.cause in ("peer_gone", "gloo_timeout") and s.failed_op is not None:
            op = s.failed_op
        blocked[s.rank] = op.blocked() if op is not None else None

    sentences: list[str] = []
    limit: LimitName | None = None
    roots = sorted((s for s in stories if s.cause in _ROOTS), key=lambda s: s.end_ms or 0.0)
    primary = roots[0] if roots else None
    if facts.stop_reason == "timeout":
        limit = "timeout"
        sentences.append(f"The run hit its {facts.limits.timeout_s:g} s time limit and was "
                         f"stopped at {_t(facts.stop_ms)}.")
    if primary is not None:
        sentences.append(_root_sentence(primary, facts))
        if limit is None:
            limit = _LIMIT_CAUSES.get(primary.cause)

    if all(s.finished for s in stories) and facts.stop_reason is None:
        sentences.append(_ok_summary(stories))
    else:
        rest = [s for s in stories if s is not primary]
        for s in rest:
            if s.cause in _FOLLOWERS:
                others = [o for o in stories if o is not s]
                sentences.append(_follower_sentence(s, others))
            elif s.cause in _ROOTS:
                sentences.append(f"Rank {s.rank} also {_doing(s)}.")
            else:
                sentences.append(f"Rank {s.rank} {_doing(s)}.")
        stuck = [s for s in stories if blocked.get(s.rank) is not None]
        if stuck and primary is None:
            hint = _mismatch_hint(stories, stuck)
            if hint:
                sentences.append(hint)
    sentences.extend(_truncation_sentences(ranks, facts.limits.output_bytes))
    if facts.leftovers:
        n = facts.leftovers
        sentences.append(f"{n} process{'es' if n != 1 else ''} started by the snippet "
                         f"{'were' if n != 1 else 'was'} still alive after the ranks ended and "
                         f"{'were' if n != 1 else 'was'} killed.")

    if facts.stop_reason == "timeout":
        outcome: Outcome = "timeout"
    elif all(s.finished for s in stories) and facts.stop_reason is None:
        outcome = "ok"
    else:
        outcome = "error"
    return Diagnosis(outcome=outcome, limit=limit, text=" ".join(sentences), blocked=blocked)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _truncation_sentences(ranks: list[RankResult], cap: int) -> list[str]:
    """One sentence per stream that wrote more than it kept; it is not a failure."""
    out = []
    for rr in ranks:
        for stream in ("stdout", "stderr"):
            total = getattr(rr, f"{stream}_bytes")
            if total is not None and total > cap:
                out.append(f"Rank {rr.rank} wrote {total:,} bytes to {stream}; the first "
                           f"{cap:,} are kept.")
    return out


def _ok_summary(stories: list[_Story]) -> str:
    n = len(stories)
    text = f"All {n} rank{'s' if n != 1 else ''} finished the snippet normally."
    ddp = [s for s in stories if s.uses_ddp]
    if ddp:
        its = {s.last_iteration or 0 for s in ddp}
        if len(its) == 1:
            it = its.pop()
            buckets = {s.buckets for s in ddp}
            b = (f", with {_count(buckets.pop(), 'gradient-bucket reduction')} per rank"
                 if len(buckets) == 1 else "")
            text += f" Each ran {it} DDP iteration{'s' if it != 1 else ''}{b}."
        else:
            parts = ", ".join(f"rank {s.rank} {s.last_iteration or 0}" for s in ddp)
            text += f" DDP iterations differed ({parts})"
            joined = [s for s in ddp if s.shadowed]
            if joined:
                text += "; " + "; ".join(
                    f"rank {s.rank} ran out of inputs after iteration {s.last_iteration or 0} "
                    f"and, joined, shadowed {_count(s.shadowed, 'gradient all-reduce')}" for s in joined)
            text += "."
    return text
