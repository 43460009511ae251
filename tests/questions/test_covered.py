"""Arithmetic the planner covers is called by name: the planner's formulas in a question's
expressions, the shapes `bank check` refuses when they are written out by hand, and the bank's
computed keys that are the planner's answers."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli import app
from app.planner import formulas as f
from app.questions.bank import load_bank
from app.questions.covered import check_covered, spelled_out
from app.questions.variants import FUNCTIONS, TemplateProblem, evaluate
from tests.factories import REAL_BANK, VARIANT_BANK


@pytest.mark.parametrize(("source", "function"), [
    ("sqrt(2 * ckpt_s * mtbf_s)", "plan_checkpoint_interval_seconds"),
    ("sqrt(mtbf_s * 2 * ckpt_s * 4) / 60", "plan_checkpoint_interval_seconds"),
    ("(1 - ckpt_s / tau_s - (tau_s / 2 + restart_s) / mtbf_s) * 100", "plan_checkpoint_overhead_fraction"),
    ("6 * params_b * 1e9 * tokens_t * 1e12", "plan_training_flops"),
    ("tokens * 6 * n / (gpus * 989e12 * mfu)", "plan_training_flops"),
    ("(p - 1) / (m + p - 1) * 100", "plan_bubble_fraction"),
    ("(pp - 1) / (v * global_batch / (dp * mbs) + pp - 1)", "plan_bubble_fraction"),
    ("2 * (world_size - 1) / world_size * tensor_mb", "plan_ring_all_reduce_bytes"),
    ("(n_gpus - 1) / n_gpus", "plan_ring_all_reduce_bytes"),
    ("s * b * h * (34 + 5 * a * s / h)", "plan_activation_bytes_per_layer"),
    ("sbh * (10 + 24 / tp) / 1e9", "plan_activation_bytes_per_layer"),
    ("34 * s * 4096 / 1e9", "plan_activation_bytes_per_layer"),
    ("4 * params_b + 12 * params_b / n_gpus", "plan_model_state_bytes"),
    ("params_b / (tp * pp) * 16", "plan_model_state_bytes"),
])
def test_written_out_arithmetic_is_found(source: str, function: str) -> None:
    assert next(s.function for s in spelled_out(source)).startswith(function)


@pytest.mark.parametrize("source", [
    "sqrt(ckpt_s * mtbf_s) / 60",                     # no 2: a wrong distractor, not the rule
    "reported * 6 / 8",                               # HFU to MFU: one name
    "(p - 1) / m * 100",                              # the bubble over ideal compute
    "2 * (ranks - 1) / (2 * int(log2(ranks)))",       # rounds, not a share of a buffer
    "(ep - 8) / ep",
    "(world_size - 1) * full_kib // world_size",      # floor division: integer chunks
    "12 * hidden * hidden",
    "6 + 4 * offset",
    "sqrt(a * a + b * b)",
    "plan_bubble_fraction(pp=p, micro_batches=m) * 100",
    "plan_checkpoint_interval_seconds(checkpoint_seconds=c, mtbf_seconds=m * 2) / 60",
    "1 +",                                            # does not parse: the loader says so
])
def test_other_arithmetic_and_the_planners_calls_pass(source: str) -> None:
    assert spelled_out(source) == []


def test_the_planners_formulas_are_template_functions() -> None:
    assert evaluate("plan_bubble_fraction(pp=p, micro_batches=m, interleave=2)", {"p": 4, "m": 16}) \
        == f.bubble_fraction(pp=4, micro_batches=16, interleave=2)
    got = evaluate("plan_activation_bytes_per_layer(seq_len=2048, micro_batch=1, hidden=12288, "
                   "heads=96, tp=8, sequence_parallel=true, recompute='none')", {})
    assert got == 2048 * 12288 * (34 + 80) / 8
    with pytest.raises(TemplateProblem, match=r"plan_bubble_fraction: .*micro_batches"):
        evaluate("plan_bubble_fraction(pp=4)", {})
    with pytest.raises(TemplateProblem, match="recompute"):
        evaluate("plan_activation_bytes_per_layer(seq_len=1, micro_batch=1, hidden=1, tp=1, "
                 "sequence_parallel=true, recompute='most')", {})
    with pytest.raises(TemplateProblem, match="takes numbers"):
        evaluate("plan_training_flops([1], 2)", {})
    assert {n for n in FUNCTIONS if n.startswith("plan_")} == set(f.BANK_FUNCTIONS)


def test_the_bank_calls_the_planner_and_spells_out_none_of_its_arithmetic() -> None:
    bank = load_bank(REAL_BANK)
    assert bank.ok
    assert check_covered(bank.questions) == []
    calling = {d.slug for d in bank.questions
               if any("plan_" in source for source in d.compute.values())}
    # The questions converted when the rule came in; more may join, none may leave.
    assert calling >= {
        "ckpt-young-daly-interval", "ckpt-goodput-at-an-interval", "pp-bubble-fraction",
        "pp-interleaved-bubble", "microbatches-and-bubble", "mem-model-state-tp-pp-zero",
        "mem-activations-whole-model", "sp-activation-memory", "zero-state-per-gpu-by-stage",
        "mem-zero-stages-gigabytes", "model-state-per-gpu-3d", "comm-fsdp-volume-per-gpu",
        "tp-time-to-train", "tp-mfu-from-step-time", "design-70b-on-512-h100",
        "design-failure-recovery-at-scale", "design-moe-model", "design-long-context-128k",
        "zero-case-70b-on-512-h100", "alpha-beta-ring-time", "tp-allreduce-time-per-layer"}


def _key(slug: str, variant: int, part: int | None = None) -> float:
    doc = next(d for d in load_bank(REAL_BANK).questions if d.slug == slug).render(variant)
    answer = doc.parts[part].answer if part is not None else doc.answer
    assert answer is not None and answer.value is not None
    return float(answer.value)


def test_the_bank_keys_are_the_planners_answers() -> None:
    """A few keys, against the module called here directly with the questions' numbers."""
    # ckpt-young-daly-interval, variant 0: C = 90 s, MTBF = 6 h, in minutes.
    assert _key("ckpt-young-daly-interval", 0) == pytest.approx(
        f.checkpoint_interval_seconds(checkpoint_seconds=90, mtbf_seconds=6 * 3600) / 60)
    # pp-interleaved-bubble, variant 0: p = 4, m = 16, v = 2, in %.
    assert _key("pp-interleaved-bubble", 0) == pytest.approx(
        100 * f.bubble_fraction(pp=4, micro_batches=16, interleave=2))
    # zero-state-per-gpu-by-stage, variant 2: 70B on 64 GPUs under ZeRO-3, in GB.
    assert _key("zero-state-per-gpu-by-stage", 2) == pytest.approx(
        f.model_state_bytes(70, tp=1, pp=1, dp=64, zero_stage=3))
    # mem-activations-whole-model, variant 0: GPT-3 175B's 96 layers, in GB.
    per_layer = f.activation_bytes_per_layer(seq_len=2048, micro_batch=1, hidden=12288, heads=96,
                                             tp=1, sequence_parallel=False, recompute="none")
    assert _key("mem-activations-whole-model", 0) == pytest.approx(per_layer * 96 / 1e9)
    assert math.isclose(_key("mem-activations-whole-model", 0), 275.4, rel_tol=0.001)


def test_bank_check_fails_on_a_question_that_writes_the_arithmetic_out(tmp_path: Path) -> None:
    bank = tmp_path / "bank"
    shutil.copytree(VARIANT_BANK, bank)
    ring = bank / "sizing" / "ring-send-volume.yaml"
    ring.write_text(ring.read_text().replace(
        "plan_ring_all_reduce_bytes(tensor_mb, ranks=world_size)",
        "2 * (world_size - 1) / world_size * tensor_mb"))
    result = CliRunner().invoke(app, ["bank", "check", str(bank)])
    assert result.exit_code == 1
    said = " ".join(result.stderr.split())
    assert ("sizing/ring-send-volume.yaml [compute.per_rank_mb]: spells out a collective's "
            "(n − 1)/n share") in said
    assert "call plan_ring_all_reduce_bytes" in said and "[covered-arithmetic]" in said
    ok = CliRunner().invoke(app, ["bank", "check", str(VARIANT_BANK)])
    assert ok.exit_code == 0, ok.stderr
