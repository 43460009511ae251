"""The run result: one versioned JSON shape for the CLI, the API and the database.

Every field and event kind is documented in docs/run-result.md. Times are
milliseconds from the start of the run, on one clock (CLOCK_MONOTONIC) shared by
all ranks. Bump RESULT_VERSION whenever a field changes meaning or goes away.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.verify.engine.artifacts import Artifact

RESULT_VERSION = 1

Outcome = Literal["ok", "error", "timeout"]
# "output" only in results stored before output floods were truncated instead of
# stopped (harness version 3 and earlier); they are still read back.
LimitName = Literal["timeout", "memory", "cpu", "output"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RankError(_Model):
    """The exception that ended a rank's snippet."""

    type: str = Field(description="Exception class, module-qualified unless a builtin.")
    message: str
    line: int | None = Field(None, description="Innermost snippet line in the traceback.")
    traceback: str = Field("", description="Traceback trimmed to start at the snippet's frames.")


class BlockedIn(_Model):
    """The collective a rank was waiting in when it was stopped or failed."""

    op: str = Field(description="e.g. all_reduce, barrier; DDP bucket reductions are all_reduce.")
    since_ms: float
    iteration: int | None = Field(None, description="DDP iteration (1 = first forward), if any.")
    line: int | None = Field(None, description="Snippet line that led to the call.")
    detail: str | None = Field(None, description="e.g. 'DDP gradient bucket 0'.")


class MemoryMark(_Model):
    """One memory measurement the checks program asked for (mark_memory), taken by the driver."""

    name: str
    bytes: int = Field(description="The learner process's anonymous and shared resident memory, "
                                   "plus its files, above what it held before the learner's "
                                   "code ran; 0 in the reference's marks.")
    ops: int = Field(description="How many collectives the process had started before the mark.")


class RankResult(_Model):
    rank: int
    values: dict[str, Any] = Field(default_factory=dict,
                                   description="report(name, value): tensors as nested lists.")
    error: RankError | None = None
    exit_code: int | None = Field(None, description="Exit status; -N when killed by signal N.")
    signal: str | None = Field(None, description="Name of the signal that ended the rank.")
    blocked_in: BlockedIn | None = None
    events: list[dict[str, Any]] = Field(default_factory=list)
    stdout: str = Field("", description="The first output_bytes written, then a truncation marker.")
    stderr: str = Field("", description="As stdout.")
    stdout_bytes: int | None = Field(None, description="Bytes written to stdout in all, kept or not.")
    stderr_bytes: int | None = Field(None, description="Bytes written to stderr in all, kept or not.")
    bytes_sent: int = Field(0, description="Bytes this rank sent on gloo's sockets (TCP_INFO).")
    cpu_ms: float | None = None
    max_rss_bytes: int | None = None
    stack: str | None = Field(None, description="Python stack when the run stopped this rank.")
    learner_values: dict[str, Any] = Field(
        default_factory=dict,
        description="Exercise runs: what the learner's own code reported; no check reads it.")
    checks_done: bool | None = Field(
        None, description="Exercise runs: whether this rank ran the checks to the end.")
    artifacts: dict[str, Artifact] = Field(
        default_factory=dict,
        description="artifact(name, kind, source): a profiler trace, a flight-recorder dump or "
                    "a memory account, by name.")
    reference_values: dict[str, Any] = Field(
        default_factory=dict,
        description="Exercise runs: what the checks reported on the reference solution, run by "
                    "the driver on this run's data.")
    reference_bytes_sent: int | None = Field(
        None, description="Exercise runs: bytes the reference solution sent on this rank.")
    memory_marks: list[MemoryMark] = Field(
        default_factory=list, description="Exercise runs: the learner process's memory marks.")
    reference_marks: list[MemoryMark] = Field(
        default_factory=list, description="Exercise runs: where the reference's marks fell.")
    memory_peak_bytes: int | None = Field(
        None, description="Exercise runs: the learner process's peak resident memory above its "
                          "peak before the learner's code ran.")
    files_written: int | None = Field(
        None, description="Exercise runs with a shared folder: files this rank's learner process "
                          "left there.")
    learner_confined: bool | None = Field(
        None, description="Exercise runs: the learner process ran fully confined (its own uid, "
                          "no network); false off the sandbox.")


class BucketRecord(_Model):
    """One gradient-bucket reduction on one rank."""

    rank: int
    ddp: int = Field(0, description="Which DDP model, in construction order.")
    iteration: int
    index: int
    params: list[str]
    bytes: int
    first_ready_ms: float | None
    last_ready_ms: float | None
    reduce_start_ms: float
    reduce_end_ms: float | None
    shadow: bool = Field(False, description="A joined rank matching the reduction with zeros.")
    hook: str = "built-in allreduce"
    bytes_sent: int | None = None
    error: str | None = None


BlockKind = Literal["forward", "backward", "backward_input", "backward_weight"]


class PipelineBlock(_Model):
    """One pipeline stage's forward or backward of one micro-batch, on one rank."""

    stage: int
    microbatch: int
    kind: BlockKind = Field(description="backward_input / backward_weight: a schedule that splits "
                                        "the backward (zero bubble) runs them apart.")
    start_ms: float
    end_ms: float | None = Field(None, description="Null if the block never finished.")
    error: str | None = None


class PipelineLane(_Model):
    """One rank's pipeline work: its stage blocks and how much of their span it sat idle."""

    rank: int
    stages: list[int] = Field(description="The stage indices this rank ran, in order.")
    blocks: list[PipelineBlock] = Field(description="In the order they started.")
    span_ms: float = Field(description="From the start of the first block to the end of the last.")
    busy_ms: float = Field(description="Time inside blocks (overlapping blocks counted once).")
    bubble_fraction: float = Field(description="1 - busy_ms / span_ms: the idle share of the span.")


class RunResult(_Model):
    version: int = RESULT_VERSION
    outcome: Outcome
    diagnosis: str
    limit: LimitName | None = None
    world_size: int
    params: dict[str, Any] = Field(default_factory=dict)
    torch_version: str
    harness_version: str
    limits: dict[str, int | float] = Field(default_factory=dict,
                                           description="The limits this run was held to.")
    ranks: list[RankResult] = Field(default_factory=list)
    buckets: list[BucketRecord] = Field(default_factory=list)
    pipeline: list[PipelineLane] = Field(default_factory=list,
                                         description="Per rank that ran pipeline stages.")
    leftover_processes: int = Field(0, description="Processes still alive after the ranks, killed.")
    timings: dict[str, float] = Field(default_factory=dict)
    checks_finished: bool | None = Field(
        None, description="Exercise runs: every rank ran the checks to the end, untampered; "
                          "null for a snippet without checks.")
    checks_problem: str | None = Field(
        None, description="Exercise runs: why the checks did not finish, in the learner's terms.")
    tampered: str | None = Field(
        None, description="Exercise runs: how a learner process broke the protocol with its "
                          "driver (a forged or garbled message); the run fails every check.")
    learner_confined: bool | None = Field(
        None, description="Exercise runs: every learner process ran fully confined; a result "
                          "that is false is not a grade (docs/exercises.md).")

    def rank(self, rank: int) -> RankResult:
        return self.ranks[rank]

    def rank_or_none(self, rank: int) -> RankResult | None:
        """The result of rank `rank`, if that rank is in this run."""
        return next((r for r in self.ranks if r.rank == rank), None)

    def bucket_reductions(self, rank: int, iteration: int | None = None) -> list[BucketRecord]:
        """One rank's bucket reductions (of one iteration, if given) in the order they started."""
        rows = [b for b in self.buckets if b.rank == rank
                and (iteration is None or b.iteration == iteration)]
        return sorted(rows, key=lambda b: (b.reduce_start_ms, b.index))
