"""The planner's service: a whole layout evaluated from the formulas, the problems that make a
layout impossible (each naming its field), the bank questions that teach each number, a quiz
of them, and "measure it small" through the verify run queue.

Pure where it can be: `evaluate` touches no database (the API calls nothing else). The
functions that read or write take a session and keyword-only arguments, like every service.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from app import ratelimit
from app.errors import InvalidInput, NotFound
from app.planner import formulas as f
from app.planner import small
from app.planner.schemas import (
    CheckpointOut,
    CommOut,
    FlopsOut,
    MemoryOut,
    PipelineOut,
    PlanIn,
    PlanOut,
    TimeOut,
)
from app.questions import service as questions_service
from app.quizzes import service as quizzes_service
from app.verify import service as verify_service
from app.verify.engine.result import RunResult
from app.verify.models import RUN_DONE, RUN_FAILED, Run
from app.verify.results import result_of

# The share of a micro-batch's compute that is backward (2 of the 6·N FLOPs per token are
# forward, 4 backward): the window in which the data-parallel gradient sync can hide.
BACKWARD_SHARE = 2 / 3
# Fresh "measure it small" runs per learner per minute (cached runs are free), like Verify's.
MEASURE_RATE_WINDOW_S = 60
# A Verify run that is not the planner's is no business of the planner's pages.
NOT_A_PLANNER_RUN = "No such measurement."


@dataclass(frozen=True)
class Problem:
    """One reason a layout cannot run: `loc` names the request field, e.g. ("layout", "tp")."""

    loc: tuple[str, ...]
    message: str


class LayoutProblems(InvalidInput):
    """A layout that does not divide: every problem found, the first as the error's own."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__(problems[0].message, loc=problems[0].loc)
        self.problems = problems


def layout_problems(plan: PlanIn) -> list[Problem]:
    """What makes this layout impossible, each naming the field to change (docs/planner.md)."""
    m, c, lay = plan.model, plan.cluster, plan.layout
    out: list[Problem] = []
    if lay.dp * lay.tp * lay.pp != c.gpus:
        hint = (f"; with tp {lay.tp} and pp {lay.pp}, dp would be {c.gpus // (lay.tp * lay.pp)}"
                if c.gpus % (lay.tp * lay.pp) == 0 else "")
        out.append(Problem(("layout", "dp"),
                           f"dp × tp × pp = {lay.dp} × {lay.tp} × {lay.pp} = "
                           f"{lay.dp * lay.tp * lay.pp}, but cluster.gpus is {c.gpus}{hint}."))
    if m.heads % lay.tp:
        out.append(Problem(("model", "heads"),
                           f"model.heads ({m.heads}) is not divisible by layout.tp ({lay.tp}): "
                           "each tensor rank holds whole attention heads."))
    if m.layers % lay.pp:
        out.append(Problem(("model", "layers"),
                           f"model.layers ({m.layers}) is not divisible by layout.pp ({lay.pp}): "
                           "each pipeline stage holds layers / pp whole layers."))
    if lay.global_batch % (lay.dp * lay.micro_batch):
        out.append(Problem(("layout", "global_batch"),
                           f"layout.global_batch ({lay.global_batch}) is not divisible by dp × "
                           f"micro_batch = {lay.dp} × {lay.micro_batch} = "
                           f"{lay.dp * lay.micro_batch}: every replica runs whole micro-batches."))
    if m.active_params is not None and m.active_params > m.params:
        out.append(Problem(("model", "active_params"),
                           f"model.active_params ({m.active_params:g}) is more than model.params "
                           f"({m.params:g})."))
    return out


@dataclass(frozen=True)
class Numbers:
    """Every quantity of one layout: the API's (bytes per GPU, seconds, counts) and the page's."""

    # the contract
    param_bytes: float
    grad_bytes: float
    optimizer_bytes: float
    activation_bytes: float
    total_bytes: float
    fits: bool
    flops_per_step: float
    flops_total: float
    step_s: float
    train_days: float
    micro_batches: int
    bubble_fraction: float
    dp_bytes_per_step: float
    interval_s: float
    # what the page adds
    capacity_bytes: float
    params_per_gpu: float
    activation_bytes_per_layer: float
    layers_per_stage: float
    in_flight: float
    tokens_per_step: float
    tokens_per_s: float
    flops_params: float
    bubble_s: float
    tp_bytes_per_step: float
    tp_s: float | None
    tp_link: str
    dp_link: str
    dp_s: float | None
    dp_hidden_s: float
    dp_exposed_s: float | None
    compute_s: float | None
    job_mtbf_s: float
    failures: float
    checkpoint_overhead: float

    @property
    def margin_bytes(self) -> float:
        """Memory left on the GPU (negative: short by that much)."""
        return self.capacity_bytes - self.total_bytes


def _one_way_gb_s(plan: PlanIn, *, within_node: bool) -> float | None:
    """The one-way bandwidth between two GPUs of a group (10⁹ bytes/s), if the cluster gives it."""
    c = plan.cluster
    if within_node:
        return c.nvlink_gb_s / 2 if c.nvlink_gb_s is not None else None
    return c.network_gbit_s / 8 if c.network_gbit_s is not None else None


def evaluate(*, plan: PlanIn) -> Numbers:
    """Every number of the layout, from app.planner.formulas; LayoutProblems if it does not divide."""
    problems = layout_problems(plan)
    if problems:
        raise LayoutProblems(problems)
    m, c, lay, t = plan.model, plan.cluster, plan.layout, plan.training
    shard = {"tp": lay.tp, "pp": lay.pp, "dp": lay.dp, "zero_stage": lay.zero_stage}
    params_b = f.param_bytes(m.params, **shard)
    grads_b = f.grad_bytes(m.params, **shard)
    optim_b = f.optimizer_bytes(m.params, **shard)
    mb = int(f.micro_batches(lay.global_batch, dp=lay.dp, micro_batch=lay.micro_batch))
    per_layer = f.activation_bytes_per_layer(
        seq_len=m.seq_len, micro_batch=lay.micro_batch, hidden=m.hidden, heads=m.heads, tp=lay.tp,
        sequence_parallel=lay.sequence_parallel, recompute=lay.recompute)
    act_b = f.activation_bytes(
        seq_len=m.seq_len, micro_batch=lay.micro_batch, hidden=m.hidden, heads=m.heads, tp=lay.tp,
        sequence_parallel=lay.sequence_parallel, recompute=lay.recompute, layers=m.layers, pp=lay.pp,
        micro_batches=mb)
    total = params_b + grads_b + optim_b + act_b
    flops_params = m.active_params if m.active_params is not None else m.params
    tokens_step = f.tokens_per_step(global_batch=lay.global_batch, seq_len=m.seq_len)
    per_step = f.training_flops(flops_params, tokens_step)
    flops_total = f.training_flops(flops_params, t.tokens)
    step_s = f.step_seconds(per_step, gpus=c.gpus, peak_tflops=c.peak_tflops, mfu=t.mfu)
    bubble = f.bubble_fraction(pp=lay.pp, micro_batches=mb, interleave=lay.interleave)
    dp_bytes = f.dp_bytes_per_step(m.params, **shard)
    mtbf_s = f.job_mtbf_seconds(mtbf_hours=c.mtbf_hours, gpus=c.gpus)
    interval = f.checkpoint_interval_seconds(checkpoint_seconds=t.checkpoint_seconds,
                                             mtbf_seconds=mtbf_s)
    days = f.train_days(flops_total, gpus=c.gpus, peak_tflops=c.peak_tflops, mfu=t.mfu)

    # The page's split of the step: the bubble's share, tensor-parallel all-reduces (on the
    # critical path), and what of the data-parallel sync the last backward does not hide.
    collectives = 6 if lay.recompute == "full" else 4  # full recompute repeats the forward's two
    tp_bytes = (f.tp_bytes_per_layer(seq_len=m.seq_len, micro_batch=lay.micro_batch, hidden=m.hidden,
                                     tp=lay.tp, collectives=collectives)
                * f.layers_per_stage(m.layers, pp=lay.pp) * mb)
    tp_within = lay.tp <= c.gpus_per_node
    tp_bw = _one_way_gb_s(plan, within_node=tp_within)
    tp_s = (f.transfer_seconds(tp_bytes, bandwidth_gb_per_s=tp_bw) if tp_bw is not None
            else (0.0 if tp_bytes == 0 else None))
    dp_within = lay.tp * lay.dp <= c.gpus_per_node
    dp_bw = _one_way_gb_s(plan, within_node=dp_within)
    dp_s = (f.transfer_seconds(dp_bytes, bandwidth_gb_per_s=dp_bw) if dp_bw is not None
            else (0.0 if dp_bytes == 0 else None))
    bubble_s = bubble * step_s
    hidden_s = BACKWARD_SHARE * step_s * (1 - bubble) / mb
    dp_exposed = f.exposed_seconds(dp_s, hidden_behind_s=hidden_s) if dp_s is not None else None
    compute_s = (step_s - bubble_s - tp_s - dp_exposed
                 if tp_s is not None and dp_exposed is not None else None)
    train_s = days * f.SECONDS_PER_DAY
    return Numbers(
        param_bytes=params_b, grad_bytes=grads_b, optimizer_bytes=optim_b, activation_bytes=act_b,
        total_bytes=total, fits=f.fits(total, gpu_memory_gb=c.gpu_memory_gb),
        flops_per_step=per_step, flops_total=flops_total, step_s=step_s, train_days=days,
        micro_batches=mb, bubble_fraction=bubble, dp_bytes_per_step=dp_bytes, interval_s=interval,
        capacity_bytes=c.gpu_memory_gb * f.GIGA,
        params_per_gpu=f.params_per_gpu(m.params, tp=lay.tp, pp=lay.pp),
        activation_bytes_per_layer=per_layer,
        layers_per_stage=f.layers_per_stage(m.layers, pp=lay.pp),
        in_flight=f.micro_batches_in_flight(pp=lay.pp, micro_batches=mb),
        tokens_per_step=tokens_step,
        tokens_per_s=f.tokens_per_second(tokens_per_step=tokens_step, step_s=step_s),
        flops_params=flops_params, bubble_s=bubble_s, tp_bytes_per_step=tp_bytes, tp_s=tp_s,
        tp_link="NVLink" if tp_within else "the network",
        dp_link="NVLink" if dp_within else "the network", dp_s=dp_s, dp_hidden_s=hidden_s,
        dp_exposed_s=dp_exposed, compute_s=compute_s, job_mtbf_s=mtbf_s,
        failures=train_s / mtbf_s,
        checkpoint_overhead=f.checkpoint_overhead_fraction(
            checkpoint_seconds=t.checkpoint_seconds, interval_s=interval, mtbf_seconds=mtbf_s),
    )


def contract(numbers: Numbers) -> PlanOut:
    """The API's answer: the contract's fields, nothing else."""
    n = numbers
    return PlanOut(
        memory=MemoryOut(params=n.param_bytes, grads=n.grad_bytes, optimizer=n.optimizer_bytes,
                         activations=n.activation_bytes, total=n.total_bytes, fits=n.fits),
        flops=FlopsOut(per_step=n.flops_per_step, total=n.flops_total),
        time=TimeOut(step_s=n.step_s, train_days=n.train_days),
        pipeline=PipelineOut(micro_batches=n.micro_batches, bubble_fraction=n.bubble_fraction),
        comm=CommOut(dp_bytes_per_step=n.dp_bytes_per_step),
        checkpoint=CheckpointOut(interval_s=n.interval_s),
    )


def plan(*, request: PlanIn) -> PlanOut:
    """POST /api/v1/plan: the contract's numbers for a layout (LayoutProblems, 422, if it does
    not divide)."""
    return contract(evaluate(plan=request))


# ---------------------------------------------------------------- the bank's questions

@dataclass(frozen=True)
class QuestionLink:
    id: int
    slug: str
    title: str


def linked_questions(*, db_session: Session, slugs: set[str]) -> dict[str, QuestionLink]:
    """The published questions among these slugs, by slug (the ones a page may link to)."""
    if not slugs:
        return {}
    return {q.slug: QuestionLink(id=q.id, slug=q.slug, title=q.title)
            for q in questions_service.list_published(db_session=db_session)
            if q.slug in slugs}


def practise(*, db_session: Session, learner_id: str, slugs: set[str]) -> str:
    """A quiz of the published questions among these slugs (the quizzes feature's own quiz);
    its id. NotFound when none of them is published."""
    found = linked_questions(db_session=db_session, slugs=slugs)
    if not found:
        raise NotFound("None of these questions is published.")
    quiz = quizzes_service.start_quiz(
        db_session=db_session, learner_id=learner_id, topics=[], difficulty=None,
        count=len(found), only={q.id for q in found.values()})
    return quiz.id


# ---------------------------------------------------------------- measure it small

def start_measure(*, db_session: Session, plan: PlanIn, learner_id: str, client_ip: str,
                  limit_per_minute: int) -> tuple[Run, small.SmallLayout]:
    """Queue (or find in the cache) the run of this layout shrunk to at most four gloo ranks.

    The layout is checked first (LayoutProblems); a new run counts against the learner's
    Verify budget, a cached one is free (RateLimited past it)."""
    evaluate(plan=plan)
    layout = small.shrink(plan)
    torch_v, harness_v = verify_service.engine_versions()
    req = verify_service.RunRequest(
        snippet_text=small.snippet_text(), world_size=layout.world_size, params=layout.params(),
        timeout_s=small.TIMEOUT_S, torch_version=torch_v, harness_version=harness_v,
        requested_by=f"learner:{learner_id}", requested_ip=client_ip)

    def charge() -> None:
        message = (f"Too many new runs in the last minute (limit {limit_per_minute} per learner); "
                   "measurements already made stay free.")
        ratelimit.hit(db_session=db_session, bucket="verify", key=learner_id,
                      limit=limit_per_minute, window_s=MEASURE_RATE_WINDOW_S, message=message)

    run, _cached = verify_service.request_run(db_session=db_session, req=req, before_new=charge)
    return run, layout


@dataclass(frozen=True)
class Measurement:
    run: Run
    layout: small.SmallLayout
    comparison: small.Comparison | None

    @property
    def done(self) -> bool:
        return self.run.status in (RUN_DONE, RUN_FAILED)


def measurement(*, db_session: Session, run_id: int) -> Measurement:
    """A planner run and, once it is done, its prediction beside what was measured. NotFound for
    any run that is not the planner's (its snippet is the planner's trusted one, so anyone may
    see it: it holds nobody's answers)."""
    run = verify_service.get_run(db_session=db_session, run_id=run_id)
    if run is None or run.snippet_hash != verify_service.snippet_hash(small.snippet_text()):
        raise NotFound(NOT_A_PLANNER_RUN)
    layout = small.SmallLayout.from_params(dict(run.params or {}))
    result: RunResult | None = result_of(run)
    return Measurement(run=run, layout=layout,
                       comparison=small.compare(layout, result) if result is not None else None)


def small_layout_of(params: dict[str, Any]) -> small.SmallLayout:
    """The small layout a run's params describe."""
    return small.SmallLayout.from_params(params)
