"""The "why" of each number on /plan: the formula, the same formula with the learner's numbers
in it, the result, its source, and the bank questions that teach it. Pure: text from a plan
and its numbers; the page links the questions that are published.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.planner import formulas as f
from app.planner.schemas import PlanIn
from app.planner.service import Numbers

# The bank's questions that teach each quantity (docs/planner.md, "Questions"): what the
# page links under each number and "Practise this" quizzes. tests/planner checks every slug
# is in question_bank/.
QUESTIONS: dict[str, tuple[str, ...]] = {
    "memory": ("mem-model-state-tp-pp-zero", "zero-state-per-gpu-by-stage", "mem-bytes-per-param-zero1",
               "mem-zero-stages-gigabytes", "model-state-per-gpu-3d", "mem-does-70b-fit-64-gpus",
               "zero-min-gpus-stage3"),
    "activations": ("mem-activations-whole-model", "sp-activation-memory",
                    "mem-checkpointing-activation-budget", "pp-gpipe-vs-1f1b-memory",
                    "mem-zero3-still-oom-long-sequence", "mem-fused-attention-term"),
    "time": ("tp-six-and-eight-flops", "tp-mfu-from-step-time", "tp-time-to-train", "tp-hfu-is-not-mfu",
             "design-cluster-for-deadline"),
    "pipeline": ("pp-bubble-fraction", "pp-interleaved-bubble", "microbatches-and-bubble",
                 "pp-1f1b-too-few-microbatches", "degrees-from-world"),
    "comm": ("comm-fsdp-volume-per-gpu", "ring-scaling", "alpha-beta-ring-time",
             "tp-allreduce-time-per-layer", "comm-tokens-to-hide-allgathers", "placement-by-traffic"),
    "checkpoint": ("ckpt-young-daly-interval", "ckpt-goodput-at-an-interval", "ckpt-sharded-save-time",
                   "design-failure-recovery-at-scale"),
}

SOURCES = {
    "zero": ("Rajbhandari et al., ZeRO (SC 2020), sections 3.1, 5 and 7",
             "https://arxiv.org/abs/1910.02054"),
    "korthikanti": ("Korthikanti et al., Reducing Activation Recomputation in Large Transformer "
                    "Models (2022), section 4, table 2", "https://arxiv.org/abs/2205.05198"),
    "megatron": ("Narayanan et al., Efficient Large-Scale Language Model Training on GPU Clusters "
                 "Using Megatron-LM (SC 2021), section 2.2", "https://arxiv.org/abs/2104.04473"),
    "kaplan": ("Kaplan et al., Scaling Laws for Neural Language Models (2020), section 2.1",
               "https://arxiv.org/abs/2001.08361"),
    "palm": ("Chowdhery et al., PaLM (2022), appendix B: MFU", "https://arxiv.org/abs/2204.02311"),
    "ring": ("Patarasuk and Yuan, Bandwidth optimal all-reduce algorithms (JPDC 2009)",
             "https://doi.org/10.1016/j.jpdc.2008.09.002"),
    "young": ("Young, A first order approximation to the optimum checkpoint interval (CACM 1974); "
              "Daly (FGCS 2006)", "https://doi.org/10.1145/361147.361115"),
}


@dataclass(frozen=True)
class Why:
    key: str
    title: str
    formula: str
    substituted: str
    result: str
    source: str
    url: str
    notes: tuple[str, ...] = ()


# ---------------------------------------------------------------- number formatting

def gb(value: float) -> str:
    """Bytes as GB (10⁹), two decimals."""
    return f"{value / f.GIGA:,.2f} GB"


def num(value: float) -> str:
    """A number as a learner reads it: whole numbers with separators, others to 4 digits,
    very large or small ones as a × 10ⁿ."""
    if value == 0:
        return "0"
    if abs(value) >= 1e7 or abs(value) < 1e-3:
        mantissa, exponent = f"{value:.3e}".split("e")
        return f"{mantissa} × 10{_superscript(int(exponent))}"
    if float(value).is_integer():
        return f"{int(value):,}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.4g}"


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def _superscript(n: int) -> str:
    return str(n).translate(_SUPERSCRIPT)


def duration(seconds: float) -> str:
    """Seconds in the unit a person would say: s, min, h or days."""
    if seconds < 120:
        return f"{seconds:,.3g} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:,.1f} min"
    if seconds < 2 * 86_400:
        return f"{seconds / 3600:,.1f} h"
    return f"{seconds / 86_400:,.1f} days"


def pct(value: float) -> str:
    return f"{value * 100:.3g} %"


# ---------------------------------------------------------------- the whys

def _zero_split(stage: int) -> str:
    return {0: "nothing is sharded", 1: "the 12 optimizer bytes are divided by dp",
            2: "the gradients and the optimizer state are divided by dp",
            3: "parameters, gradients and optimizer state are all divided by dp"}[stage]


def _activation_formula(plan: PlanIn) -> str:
    lay = plan.layout
    sp = lay.sequence_parallel
    return {
        ("none", True): "s·b·h·(34 + 5·a·s/h) / t",
        ("none", False): "s·b·h·(10 + 24/t + 5·a·s/(h·t))",
        ("selective", True): "s·b·h·34 / t",
        ("selective", False): "s·b·h·(10 + 24/t)",
        ("full", True): "2·s·b·h / t",
        ("full", False): "2·s·b·h",
    }[(lay.recompute, sp)]


def _activation_substituted(plan: PlanIn) -> str:
    m, lay = plan.model, plan.layout
    s, b, h, a, t = m.seq_len, lay.micro_batch, m.hidden, m.heads, lay.tp
    sbh = f"{s:,}·{b}·{h:,}"
    return {
        ("none", True): f"{sbh}·(34 + 5·{a}·{s:,}/{h:,}) / {t}",
        ("none", False): f"{sbh}·(10 + 24/{t} + 5·{a}·{s:,}/({h:,}·{t}))",
        ("selective", True): f"{sbh}·34 / {t}",
        ("selective", False): f"{sbh}·(10 + 24/{t})",
        ("full", True): f"2·{sbh} / {t}",
        ("full", False): f"2·{sbh}",
    }[(lay.recompute, lay.sequence_parallel)]


def whys(plan: PlanIn, n: Numbers) -> dict[str, Why]:
    """Each number's formula, substituted and sourced, by the page's key."""
    m, c, lay, t = plan.model, plan.cluster, plan.layout, plan.training
    P, tp, pp, dp = m.params, lay.tp, lay.pp, lay.dp
    zero = lay.zero_stage
    out: dict[str, Why] = {}
    out["memory"] = Why(
        "memory", "Model state per GPU",
        formula="params/(tp·pp) × (2 + 2 + 12) bytes, with ZeRO-" + str(zero) + ": " + _zero_split(zero),
        substituted=(f"{num(P)}/({tp}·{pp}) = {num(n.params_per_gpu)} parameters per GPU; "
                     f"params {gb(n.param_bytes)}, grads {gb(n.grad_bytes)}, "
                     f"optimizer {gb(n.optimizer_bytes)}"),
        result=gb(n.param_bytes + n.grad_bytes + n.optimizer_bytes),
        source=SOURCES["zero"][0], url=SOURCES["zero"][1],
        notes=("Mixed-precision Adam: bf16 parameters (2 bytes) and gradients (2), fp32 master "
               "weights and two fp32 moments (12): 16 bytes per parameter.",
               "The embedding and output layers are treated like the rest of the model: in a "
               "real pipeline the first and last stages hold a little more."))
    out["activations"] = Why(
        "activations", "Activations on the first pipeline stage",
        formula=(f"{_activation_formula(plan)} bytes per layer and micro-batch × layers/pp × "
                 "min(pp, m) micro-batches in flight"),
        substituted=(f"{_activation_substituted(plan)} = {gb(n.activation_bytes_per_layer)} × "
                     f"{num(n.layers_per_stage)} layers × {num(n.in_flight)} in flight"),
        result=gb(n.activation_bytes), source=SOURCES["korthikanti"][0], url=SOURCES["korthikanti"][1],
        notes=(f"Recompute “{lay.recompute}”, sequence parallelism "
               f"{'on' if lay.sequence_parallel else 'off'}; s = {m.seq_len:,}, b = {lay.micro_batch}, "
               f"h = {m.hidden:,}, a = {m.heads}, t = {tp}.",
               "1F1B holds at most pp micro-batches on the first stage (Megatron-LM, section 2.2); "
               "GPipe would hold all m."))
    fits_text = (f"fits, {gb(n.margin_bytes)} to spare" if n.fits
                 else f"does not fit by {gb(-n.margin_bytes)}")
    out["total"] = Why(
        "total", "Memory per GPU",
        formula="params + grads + optimizer + activations ≤ GPU memory",
        substituted=(f"{gb(n.param_bytes)} + {gb(n.grad_bytes)} + {gb(n.optimizer_bytes)} + "
                     f"{gb(n.activation_bytes)} = {gb(n.total_bytes)} against {gb(n.capacity_bytes)}"),
        result=fits_text, source=SOURCES["zero"][0], url=SOURCES["zero"][1],
        notes=("Buffers, fragmentation and the framework's own memory come on top: keep a few GB free.",))
    flops_note = ("" if m.active_params is None else
                  f" (a mixture of experts: the {num(m.active_params)} parameters each token uses)")
    out["time"] = Why(
        "time", "Step time and days to train",
        formula="6 · N · tokens / (gpus · peak · MFU)",
        substituted=(f"6 · {num(n.flops_params)}{flops_note} · {num(n.tokens_per_step)} tokens per step "
                     f"= {num(n.flops_per_step)} FLOPs; / ({c.gpus:,} · {num(c.peak_tflops)}×10¹² · "
                     f"{t.mfu:g}) = {duration(n.step_s)} per step; {num(t.tokens)} tokens → "
                     f"{num(n.flops_total)} FLOPs → {n.train_days:,.1f} days"),
        result=f"{duration(n.step_s)} per step, {n.train_days:,.1f} days",
        source=SOURCES["kaplan"][0] + "; " + SOURCES["palm"][0], url=SOURCES["palm"][1],
        notes=("6·N·D leaves out attention's own FLOPs (12·L·H·Q·T per token in PaLM's appendix B) "
               "and any recomputation.",
               f"Tokens per second: {num(n.tokens_per_step)} / {duration(n.step_s)} = "
               f"{num(n.tokens_per_s)}."))
    out["pipeline"] = Why(
        "pipeline", "Micro-batches and the bubble",
        formula="m = global_batch / (dp · micro_batch); bubble = (pp − 1) / (v · m + pp − 1)",
        substituted=(f"m = {lay.global_batch:,} / ({dp} · {lay.micro_batch}) = {n.micro_batches:,}; "
                     f"({pp} − 1) / ({lay.interleave} · {n.micro_batches:,} + {pp} − 1) = "
                     f"{pct(n.bubble_fraction)}"),
        result=pct(n.bubble_fraction), source=SOURCES["megatron"][0], url=SOURCES["megatron"][1],
        notes=(f"That is {duration(n.bubble_s)} of each step idle on every GPU.",))
    size = f.GRAD_BYTES * n.params_per_gpu
    factor = "3" if zero >= 3 else "2"
    out["comm"] = Why(
        "comm", "Data-parallel bytes per GPU per step",
        formula=(f"{factor} · (dp − 1)/dp · 2 · params/(tp · pp)"
                 + (" (all-gather in forward and in backward, reduce-scatter)" if zero >= 3
                    else " (a ring all-reduce of the bf16 gradients)")),
        substituted=f"{factor} · ({dp} − 1)/{dp} · {gb(size)} = {gb(n.dp_bytes_per_step)}",
        result=gb(n.dp_bytes_per_step), source=SOURCES["zero"][0] + "; " + SOURCES["ring"][0],
        url=SOURCES["zero"][1],
        notes=_comm_notes(plan, n))
    out["checkpoint"] = Why(
        "checkpoint", "Checkpoint interval",
        formula="τ = √(2 · C · MTBF_job), MTBF_job = MTBF_gpu / gpus",
        substituted=(f"MTBF_job = {num(c.mtbf_hours)} h · 3600 / {c.gpus:,} = {duration(n.job_mtbf_s)}; "
                     f"√(2 · {num(t.checkpoint_seconds)} s · {num(n.job_mtbf_s)} s) = "
                     f"{duration(n.interval_s)}"),
        result=duration(n.interval_s), source=SOURCES["young"][0], url=SOURCES["young"][1],
        notes=(f"About {n.failures:,.0f} failures over the run; checkpoints and lost work at this "
               f"interval cost C/τ + τ/(2·MTBF) = {pct(n.checkpoint_overhead)} of the time.",))
    return out


def _comm_notes(plan: PlanIn, n: Numbers) -> tuple[str, ...]:
    notes = []
    if n.dp_s is not None:
        notes.append(f"Over {n.dp_link} that takes {duration(n.dp_s)}; the last micro-batch's "
                     f"backward ({duration(n.dp_hidden_s)}) hides part of it, leaving "
                     f"{duration(n.dp_exposed_s or 0.0)} exposed.")
    else:
        notes.append("Give the cluster's bandwidths to see the time it takes.")
    if plan.layout.tp > 1:
        notes.append(f"Tensor parallelism adds {gb(n.tp_bytes_per_step)} per GPU per step over "
                     f"{n.tp_link} (four all-reduces of s·b·h values per layer and micro-batch), "
                     "on the critical path.")
    if plan.layout.zero_stage >= 3:
        notes.append("FSDP that frees the gathered parameters between micro-batches gathers them "
                     "again for each: with gradient accumulation, more than this.")
    return tuple(notes)
