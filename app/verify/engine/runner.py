"""One run, seen from the engine's process: hand it to the forkserver, watch it, enforce limits.

The runner reads every rank's event pipe, stdout and stderr as they arrive, and
the leader's reports of rank exits. It asks the leader to stop the run at the
wall-clock deadline, and kills the run's whole process group itself if the
leader does not finish. Nothing a rank sends is trusted: every event line is checked
against its schema (events.py), a line that fails makes that rank's result an
error of the snippet, and sizes are capped. A rank that floods its
output is not stopped: the first `output_bytes` of each stream are kept and the
rest is read and thrown away, so the run ends however the snippet ends.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import selectors
import signal
import socket
import struct
import time
from dataclasses import dataclass, field
from typing import Any

from app.verify.engine.diagnosis import RunFacts, diagnose
from app.verify.engine.errors import EngineFailure
from app.verify.engine.events import MALFORMED_EVENT_TYPE, MalformedEvent, parse_event
from app.verify.engine.forbid import compose, split
from app.verify.engine.limits import Limits
from app.verify.engine.pool import Pool
from app.verify.engine.result import (
    BucketRecord,
    MemoryMark,
    PipelineBlock,
    PipelineLane,
    RankError,
    RankResult,
    RunResult,
)

# The leader must report that the ranks exist within this long.
START_WAIT_S = 15.0
# After asking the leader to stop a run, how long before the runner kills the session.
STOP_GRACE_S = 5.0
# After the leader is done, how long to drain what the pipes still hold.
DRAIN_S = 2.0
# Per rank: event bytes and events kept. Past MAX_EVENTS only the events that decide an
# exercise's verdict are kept (the checks' reports and how the rank ended).
MAX_EVENT_BYTES = 16 * 2**20
MAX_EVENTS = 50_000
_ESSENTIAL = frozenset({"report", "exception", "snippet_end", "checks_done", "setup_error",
                        "events_truncated", "learner_end", "reference_end", "protocol_error",
                        "memory_mark"})
READ_CHUNK = 65536
_UCRED = struct.Struct("iII")  # struct ucred: pid, uid, gid
# Output pipes are widened to this (Linux's default pipe-max-size): a flooding
# rank then blocks on a full pipe 16 times less often than with the default 64 KiB,
# and the runner wakes 16 times less often to drain it. Best effort: the kernel may
# refuse (a lowered pipe-max-size, a user over its pipe quota); 64 KiB still works.
OUTPUT_PIPE_BYTES = 2**20
OUTPUT_READ_CHUNK = OUTPUT_PIPE_BYTES


@dataclass
class _Capture:
    """The first `cap` bytes of a stream, and how much was written in all.

    Memory stays at `cap` whatever a rank writes: past it, chunks are only counted.
    """

    cap: int
    data: bytearray = field(default_factory=bytearray)
    total: int = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.cap - len(self.data)
        if room > 0:
            self.data += chunk[:room]

    @property
    def overflowed(self) -> bool:
        return self.total > self.cap

    def text(self) -> str:
        out = self.data.decode("utf-8", errors="replace")
        if self.overflowed:
            out += f"\n[truncated: {self.total} bytes written, the first {self.cap} kept]\n"
        return out


@dataclass
class _Rank:
    rank: int
    stdout: _Capture
    stderr: _Capture
    events: list[dict[str, Any]] = field(default_factory=list)
    event_bytes: int = 0
    dropped: int = 0
    malformed: int = 0
    partial: bytes = b""
    exit: dict[str, Any] | None = None
    # Set by _assemble from the rank's events (an exercise run's driver emits them).
    exercise: bool = False
    checks_done: bool = False
    tampered: str | None = None

    def feed_events(self, chunk: bytes) -> None:
        *lines, self.partial = (self.partial + chunk).split(b"\n")
        if len(self.partial) > MAX_EVENT_BYTES:
            self.partial = b""
            self.dropped += 1
        for line in lines:
            self.event_bytes += len(line)
            if self.event_bytes > MAX_EVENT_BYTES:
                self.dropped += 1
                continue
            try:
                event = parse_event(line)
            except MalformedEvent as exc:
                self.malformed += 1
                if self.malformed == 1:
                    self.events.append({"kind": "malformed_event", "t": time.monotonic_ns(),
                                        "detail": str(exc)})
                continue
            if len(self.events) >= MAX_EVENTS and event["kind"] not in _ESSENTIAL:
                self.dropped += 1
                continue
            self.events.append(event)


def run(pool: Pool, *, code: str, world_size: int, params: dict[str, Any], limits: Limits,
        trace_buckets: bool, torch_version: str, harness_version: str) -> RunResult:
    """Execute one snippet on `world_size` fresh ranks and return what happened."""
    pool.ensure_started()  # the first run's forkserver start-up is not the snippet's time
    t0 = time.monotonic_ns()
    ctrl, leader_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    # The kernel attaches the leader's pid to what it sends, as this process sees
    # it: inside the sandbox's PID namespace the leader's own idea of its pid is
    # meaningless here.
    ctrl.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    ranks = [_Rank(r, _Capture(limits.output_bytes), _Capture(limits.output_bytes))
             for r in range(world_size)]
    readers: dict[int, tuple[str, int]] = {}
    writers: list[int] = []
    try:
        for r in range(world_size):
            for kind in ("events", "stdout", "stderr"):
                rfd, wfd = os.pipe()
                readers[rfd] = (kind, r)
                if kind != "events":
                    _widen(rfd)
                writers.append(wfd)
        pool.submit([leader_end.fileno(), *writers])
    except BaseException:
        for fd in readers:
            os.close(fd)
        ctrl.close()
        raise
    finally:
        leader_end.close()
        for fd in writers:
            os.close(fd)
    public, secret = _split_secret(code)
    spec = {"code": public, "world_size": world_size, "params": params,
            "limits": limits.as_dict(), "trace_buckets": trace_buckets,
            "shared_folder": secret is not None and secret.get("shared_folder") is True}
    watch = _Watch(ctrl, readers, ranks, limits, t0, secret)
    try:
        ctrl.sendall((json.dumps(spec) + "\n").encode())
        watch.loop()
    except OSError as exc:
        watch.abort()
        raise EngineFailure(f"lost contact with the run's leader: {exc}") from exc
    except BaseException:
        watch.abort()
        raise
    finally:
        watch.close()
    wall_ms = (time.monotonic_ns() - t0) / 1e6
    return _assemble(watch, ranks, t0=t0, wall_ms=wall_ms, code=code, world_size=world_size,
                     params=params, limits=limits, torch_version=torch_version,
                     harness_version=harness_version, pool=pool)


def _split_secret(code: str) -> tuple[str, dict[str, Any] | None]:
    """An exercise run's text without the reference solution, and what it held back: the
    reference goes to the leader only once every rank (and so every learner process,
    forked before anything secret exists in its rank) has started (driver.py)."""
    parts = split(code)
    if parts is None:
        return code, None
    learner, checks, options = parts
    reference = options.get("reference")
    shared = options.get("shared_folder") is True
    public = compose(learner, checks, forbid=[n for n in options.get("forbid", [])
                                              if isinstance(n, str)], shared_folder=shared)
    return public, {"reference": reference if isinstance(reference, str) else None,
                    "shared_folder": shared}


def _widen(fd: int) -> None:
    """Ask for a larger pipe buffer (see OUTPUT_PIPE_BYTES); keep the default if refused."""
    with contextlib.suppress(OSError, AttributeError):  # F_SETPIPE_SZ: Linux, Python 3.10+
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, OUTPUT_PIPE_BYTES)


class _Watch:
    """The event loop of one run."""

    def __init__(self, ctrl: socket.socket, readers: dict[int, tuple[str, int]],
                 ranks: list[_Rank], limits: Limits, t0: int,
                 secret: dict[str, Any] | None = None) -> None:
        self.ctrl = ctrl
        self.secret = secret
        self.readers = readers
        self.ranks = ranks
        self.limits = limits
        self.t0 = t0
        self.sel = selectors.DefaultSelector()
        self.ctrl_buf = b""
        self.leader: int | None = None
        # The leader's pid in this process's PID namespace (from SCM_CREDENTIALS).
        self.leader_pid: int | None = None
        self.done: dict[str, Any] | None = None
        self.stop_reason: str | None = None
        self.stop_t: int | None = None
        self.error: str | None = None
        # Set when the ranks outlived the stop's grace and the whole session was killed.
        self.runaway = False
        self.sel.register(ctrl, selectors.EVENT_READ, ("ctrl", -1))
        for fd, data in readers.items():
            self.sel.register(fd, selectors.EVENT_READ, data)

    def loop(self) -> None:
        start_by = time.monotonic() + START_WAIT_S
        deadline = self.t0 / 1e9 + self.limits.timeout_s
        drain_until: float | None = None
        while True:
            now = time.monotonic()
            if self.error is not None:
                raise EngineFailure(f"the run could not start: {self.error}")
            if self.done is not None:
                if not self.readers:
                    return
                drain_until = drain_until or now + DRAIN_S
                if now >= drain_until:
                    return
            if self.leader is None and now >= start_by:
                raise EngineFailure("the forkserver did not start the run's ranks in time")
            if self.stop_reason is None and now >= deadline:
                self.stop("timeout")
            if self.stop_t is not None and self.done is None and now >= self.stop_t / 1e9 + STOP_GRACE_S:
                # The ranks would not stop (a fork bomb keeps the leader's kills behind its
                # forks): the code's doing, so a verdict on it, never a retry.
                self.abort()
                self.runaway = True
                return
            wakeups = [w for w in (
                start_by if self.leader is None else None,
                deadline if self.stop_reason is None else None,
                self.stop_t / 1e9 + STOP_GRACE_S if self.stop_t and not self.done else None,
                drain_until,
            ) if w is not None]
            timeout = max(0.0, min(wakeups) - now) if wakeups else None
            for key, _ in self.sel.select(timeout):
                kind, rank = key.data
                if kind == "ctrl":
                    self._read_ctrl()
                else:
                    self._read_rank(key.fd, kind, rank)

    def _read_ctrl(self) -> None:
        data, ancillary, _, _ = self.ctrl.recvmsg(READ_CHUNK, socket.CMSG_SPACE(_UCRED.size))
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and payload:
                self.leader_pid = _UCRED.unpack(payload[:_UCRED.size])[0] or None
        if not data:
            self.sel.unregister(self.ctrl)
            if self.done is None:
                raise EngineFailure("the run's leader died")
            return
        *lines, self.ctrl_buf = (self.ctrl_buf + data).split(b"\n")
        for line in lines:
            msg = json.loads(line)
            kind = msg.get("type")
            if kind == "started":
                self.leader = int(msg["leader"])  # in the leader's PID namespace
                if self.secret is not None:
                    self.ctrl.sendall((json.dumps({"type": "secret", **self.secret}) + "\n").encode())
            elif kind == "exit":
                self.ranks[int(msg["rank"])].exit = msg
            elif kind == "done":
                self.done = msg
            elif kind == "error":
                self.error = str(msg.get("message"))

    def _read_rank(self, fd: int, kind: str, rank: int) -> None:
        try:
            chunk = os.read(fd, READ_CHUNK if kind == "events" else OUTPUT_READ_CHUNK)
        except BlockingIOError:
            return
        if not chunk:
            self.sel.unregister(fd)
            os.close(fd)
            del self.readers[fd]
            return
        r = self.ranks[rank]
        if kind == "events":
            r.feed_events(chunk)
            return
        # Past its cap a stream is still read to the end, only not kept: stopping the
        # run instead would turn a chatty but correct snippet into an error, and a
        # rank blocked on a full pipe would look like a hang. A flood that never ends
        # meets the wall-clock limit like any other endless loop.
        (r.stdout if kind == "stdout" else r.stderr).feed(chunk)

    def stop(self, reason: str) -> None:
        """Ask the leader to dump stacks and kill the ranks."""
        self.stop_reason = reason
        self.stop_t = time.monotonic_ns()
        with contextlib.suppress(OSError):
            self.ctrl.sendall(b'{"type": "kill"}\n')

    def abort(self) -> None:
        """Kill the run's whole session (the leader made it; every rank is in it)."""
        if self.leader is not None and self.leader_pid is not None:
            with contextlib.suppress(OSError):
                os.killpg(self.leader_pid, signal.SIGKILL)

    def close(self) -> None:
        for fd in list(self.readers):
            with contextlib.suppress(KeyError, ValueError):
                self.sel.unregister(fd)
            os.close(fd)
        self.readers.clear()
        self.sel.close()
        self.ctrl.close()


def _ms(t: int, t0: int) -> float:
    return round((t - t0) / 1e6, 3)


def _signal_name(code: int | None) -> str | None:
    if code is None or code >= 0:
        return None
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def _assemble(watch: _Watch, ranks: list[_Rank], *, t0: int, wall_ms: float, code: str,
              world_size: int,
              params: dict[str, Any], limits: Limits, torch_version: str, harness_version: str,
              pool: Pool) -> RunResult:
    results: list[RankResult] = []
    setup_errors: list[str] = []
    any_started = False
    stop_ms = _ms(watch.stop_t, t0) if watch.stop_t is not None else None
    for r in ranks:
        events: list[dict[str, Any]] = []
        values: dict[str, Any] = {}
        learner_values: dict[str, Any] = {}
        artifacts: dict[str, Any] = {}
        reference_values: dict[str, Any] = {}
        marks: list[MemoryMark] = []
        reference_marks: list[MemoryMark] = []
        learner_end: dict[str, Any] | None = None
        reference_bytes: int | None = None
        error: RankError | None = None
        malformed: dict[str, Any] | None = None
        sent = 0
        for raw in r.events:
            kind = raw["kind"]
            event = {"t_ms": _ms(raw["t"], t0), "kind": kind}
            event.update((k, v) for k, v in raw.items() if k not in ("t", "kind"))
            source = event.get("source")
            if kind in ("learner_end", "reference_end", "checks_done", "protocol_error") or (
                    kind == "snippet_start" and event.get("checks") is True):
                r.exercise = True
            if kind == "report" and isinstance(event.get("name"), str):
                # In an exercise run the checks' reports are what the checks read (and compare
                # with the reference's, reported by the driver); the learner's own are shown.
                into = {"learner": learner_values, "reference": reference_values}.get(
                    str(source), values)
                into[event["name"]] = event.pop("value", None)
                if source == "reference":
                    continue  # the reference's run is not the learner's trace
            elif kind == "memory_mark":
                mark = MemoryMark(name=event["name"], bytes=event["bytes"], ops=event["ops"])
                (reference_marks if source == "reference" else marks).append(mark)
                if source == "reference":
                    continue
            elif kind == "reference_end":
                reference_bytes = int(event["bytes_sent"])
                continue
            elif kind == "learner_end":
                learner_end = event
            elif kind == "checks_done":
                r.checks_done = True
            elif kind == "protocol_error":
                r.tampered = f"the learner process broke the protocol: {event['detail']}"
            elif kind == "artifact" and not r.exercise:
                artifacts[event["name"]] = event.pop("artifact")
            elif kind == "exception":
                error = RankError(type=str(event.get("type", "Exception")),
                                  message=str(event.get("message", "")),
                                  line=event.get("line") if isinstance(event.get("line"), int) else None,
                                  traceback=str(event.pop("traceback", "")))
            elif kind == "setup_error":
                setup_errors.append(f"rank {r.rank}: {event.get('type')}: {event.get('message')}")
            elif kind == "malformed_event":
                event["count"] = r.malformed
                malformed = event
            if kind == "snippet_start":
                any_started = True
            if isinstance(event.get("sent_total"), int):
                sent = max(sent, event["sent_total"])
            events.append(event)
        if r.tampered is not None and malformed is None:
            error = RankError(type="ProtocolError", message=r.tampered)
        if malformed is not None:
            # Whatever else the rank did, its trace can no longer be believed.
            more = f" ({r.malformed} malformed lines in all)" if r.malformed > 1 else ""
            error = RankError(type=MALFORMED_EVENT_TYPE,
                              message=f"the rank sent a malformed event: {malformed['detail']}{more}")
        if r.dropped:
            events.append({"t_ms": events[-1]["t_ms"] if events else 0.0, "kind": "events_dropped",
                           "count": r.dropped})
        exit_code = signal_name = None
        cpu_ms = max_rss = None
        stack = None
        if r.exit is not None:
            exit_code = int(r.exit["code"])
            signal_name = _signal_name(exit_code)
            cpu_ms = round(float(r.exit.get("cpu_s", 0.0)) * 1000, 3)
            max_rss = int(r.exit.get("maxrss_kb", 0)) * 1024
            stack = r.exit.get("stack")
            killed = watch.stop_reason if r.exit.get("killed") else None
            events.append({"t_ms": _ms(int(r.exit["t"]), t0), "kind": "exit", "exit_code": exit_code,
                           "signal": signal_name, "killed_by": killed})
        results.append(RankResult(
            rank=r.rank, values=values, error=error, exit_code=exit_code, signal=signal_name,
            events=events, stdout=r.stdout.text(), stderr=r.stderr.text(),
            stdout_bytes=r.stdout.total, stderr_bytes=r.stderr.total, bytes_sent=sent,
            cpu_ms=cpu_ms, max_rss_bytes=max_rss, stack=stack,
            learner_values=learner_values, checks_done=r.checks_done if r.exercise else None,
            artifacts=artifacts,
            reference_values=reference_values if r.exercise else {},
            reference_bytes_sent=reference_bytes, memory_marks=marks,
            reference_marks=reference_marks,
            memory_peak_bytes=learner_end.get("peak_bytes") if learner_end else None,
            files_written=learner_end.get("files") if learner_end else None,
            learner_confined=learner_end.get("confined") if learner_end else None,
        ))
    if not any_started:
        if watch.stop_reason == "timeout":
            detail = "the ranks did not reach the snippet before the time limit"
        else:
            detail = "; ".join(setup_errors) or "no rank reached the snippet"
        tails = "\n".join(f"rank {r.rank} stderr: {r.stderr.text()[-1500:]}" for r in ranks
                          if r.stderr.data)
        raise EngineFailure(f"{detail}\n{tails}\n{pool.log_tail(1500)}".strip())
    leftovers = int(watch.done.get("leftovers", 0)) if watch.done else 0
    facts = RunFacts(world_size=world_size, limits=limits, stop_reason=watch.stop_reason,
                     stop_ms=stop_ms, leftovers=leftovers)
    diagnosis = diagnose(results, facts, code)
    for rr in results:
        rr.blocked_in = diagnosis.blocked.get(rr.rank)
    exercise = any(r.exercise for r in ranks)
    checks_problem = _checks_problem(ranks, results, watch.stop_reason) if exercise else None
    tampered = "; ".join(f"rank {r.rank}: {r.tampered}" for r in ranks if r.tampered) or None
    text = diagnosis.text
    if watch.runaway:
        text += (f"\nThe ranks did not stop within {STOP_GRACE_S:g} s of being told to (the code "
                 "kept starting processes, up to its limit of processes, or ignored the stop), so "
                 "the engine killed the whole run: what each rank did last is lost.")
    if tampered:
        text += (f"\nThe run ended on a broken message ({tampered}): it fails every check, and its "
                 "authors are told.")
    elif checks_problem:
        text += f"\nThe exercise's checks did not finish: {checks_problem}."
    ready = [e["t_ms"] for rr in results for e in rr.events if e["kind"] == "group_ready"]
    timings = {"wall_ms": round(wall_ms, 3)}
    if ready:
        timings["ranks_ready_ms"] = max(ready)
    cpu = [rr.cpu_ms for rr in results if rr.cpu_ms is not None]
    if cpu:
        timings["cpu_ms"] = round(sum(cpu), 3)
    return RunResult(
        outcome=diagnosis.outcome, diagnosis=text, limit=diagnosis.limit,
        world_size=world_size, params=params, torch_version=torch_version,
        harness_version=harness_version, limits=limits.as_dict(), ranks=results,
        buckets=bucket_records(results), pipeline=pipeline_lanes(results),
        leftover_processes=leftovers, timings=timings,
        checks_finished=(checks_problem is None and not tampered) if exercise else None,
        checks_problem=checks_problem, tampered=tampered,
        learner_confined=(all(rr.learner_confined is True for rr in results)
                          if exercise else None),
    )


def _checks_problem(ranks: list[_Rank], results: list[RankResult],
                    stop_reason: str | None) -> str | None:
    """Why an exercise run's checks did not finish, in the learner's terms: the rank whose
    code ended first (a peer's "connection closed" is only the echo of it)."""
    ended: list[tuple[int, int, str]] = []
    for r, rr in zip(ranks, results, strict=True):
        if r.checks_done:
            continue
        event = next((e for e in reversed(r.events) if e["kind"] == "exception"), None)
        if event is not None:
            ended.append((0, int(event["t"]), _ended_how(r.rank, event)))
        elif rr.exit_code is None or (r.exit is not None and r.exit.get("killed")):
            how = "at the time limit" if stop_reason == "timeout" else "by the engine"
            ended.append((1, 0, f"rank {r.rank} was stopped {how} before its checks finished"))
        elif rr.signal:
            ended.append((1, 0, f"rank {r.rank} was killed by {rr.signal} before its checks "
                                "finished"))
        else:
            ended.append((1, 0, f"rank {r.rank} exited (status {rr.exit_code}) before its "
                                "checks finished"))
    return min(ended)[2] if ended else None


def _ended_how(rank: int, event: dict[str, Any]) -> str:
    what = str(event.get("type", "an exception")).rsplit(".", 1)[-1]
    line = event.get("line")
    at = f" at line {line}" if isinstance(line, int) and not isinstance(line, bool) else ""
    lines = str(event.get("message", "")).strip().splitlines()
    # gloo prefixes its errors with the C++ source location: drop it (as the diagnosis does).
    message = re.sub(r"^\[[^\]]*\.(cc|cpp|h):\d+\]\s*", "", lines[0])[:300] if lines else ""
    # ... and its advice ("This is typically caused by ..."): keep the first sentence.
    cut = message.find(". This is typically")
    message = message[:cut + 1] if cut != -1 else message
    said = f": {message}" if message else ""
    if event.get("phase") == "learner":
        return f"rank {rank}: your code ended before the checks ran: {what}{at}{said}"
    if what == "SystemExit":
        return f"rank {rank}: your code ended the run while the checks ran: {what}{at}{said}"
    return f"rank {rank}: the checks could not finish: {what}{at}{said}"


def bucket_records(ranks: list[RankResult]) -> list[BucketRecord]:
    """One record per bucket reduction per rank, with its parameters' ready times."""
    records: list[BucketRecord] = []
    for rr in ranks:
        ready: dict[tuple[int, int, str], float] = {}
        ends: dict[int, dict[str, Any]] = {}
        for e in rr.events:
            if e["kind"] == "grad_ready":
                ready[(e.get("ddp", 0), e.get("iteration", 0), e.get("param", ""))] = e["t_ms"]
            elif e["kind"] == "bucket_reduce_end":
                ends[e.get("seq", -1)] = e
        for e in rr.events:
            if e["kind"] != "bucket_reduce_start":
                continue
            ddp, iteration = int(e.get("ddp", 0)), int(e.get("iteration", 0))
            names = [str(p) for p in e.get("params", [])]
            times = [ready[k] for k in ((ddp, iteration, n) for n in names) if k in ready]
            end = ends.get(e.get("seq", -1))
            records.append(BucketRecord(
                rank=rr.rank, ddp=ddp, iteration=iteration, index=int(e.get("index", 0)),
                params=names, bytes=int(e.get("bytes", 0)),
                first_ready_ms=min(times) if times else None,
                last_ready_ms=max(times) if times else None,
                reduce_start_ms=e["t_ms"], reduce_end_ms=end["t_ms"] if end else None,
                shadow=bool(e.get("shadow", False)), hook=str(e.get("hook", "built-in allreduce")),
                bytes_sent=end.get("bytes_sent") if end else None,
                error=end.get("error") if end else None,
            ))
    return records


def pipeline_lanes(ranks: list[RankResult]) -> list[PipelineLane]:
    """Per rank that ran pipeline stages: its blocks, and the idle share of their span."""
    lanes: list[PipelineLane] = []
    for rr in ranks:
        ends = {e["seq"]: e for e in rr.events if e["kind"] in ("stage_forward_end", "stage_backward_end")}
        blocks = []
        for e in rr.events:
            if e["kind"] not in ("stage_forward_start", "stage_backward_start"):
                continue
            end = ends.get(e["seq"])
            part = e.get("part")
            kind = "forward" if e["kind"] == "stage_forward_start" else (
                "backward" if part in (None, "full") else f"backward_{part}")
            blocks.append(PipelineBlock(
                stage=e["stage"], microbatch=e["microbatch"], kind=kind, start_ms=e["t_ms"],
                end_ms=end["t_ms"] if end is not None else None,
                error=end.get("error") if end is not None else None))
        if not blocks:
            continue
        done = sorted((b.start_ms, b.end_ms) for b in blocks if b.end_ms is not None)
        busy = 0.0
        reach = None
        for start, stop in done:  # the union of the blocks, so nested ones count once
            if reach is None or start > reach:
                busy += stop - start
                reach = stop
            elif stop > reach:
                busy += stop - reach
                reach = stop
        first = min(b.start_ms for b in blocks)
        last = max((b.end_ms for b in blocks if b.end_ms is not None), default=first)
        span = max(0.0, last - first)
        lanes.append(PipelineLane(
            rank=rr.rank, stages=sorted({b.stage for b in blocks}), blocks=blocks,
            span_ms=round(span, 3), busy_ms=round(busy, 3),
            bubble_fraction=round(1 - busy / span, 4) if span > 0 else 0.0))
    return lanes
