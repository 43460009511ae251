"""The planner's formulas against published figures: ZeRO's 16 bytes per parameter and its
figure 1, Korthikanti's per-layer activations for GPT-3 175B, PaLM 540B's MFU, and the 70B
example worked by hand in docs/planner.md."""

from __future__ import annotations

import math

import pytest

from app.planner import formulas as f
from app.planner.schemas import PlanIn
from app.planner.service import plan

GB = 1e9


def test_mixed_precision_adam_keeps_16_bytes_per_parameter() -> None:
    """ZeRO, section 3.1: (2 + 2 + K)Ψ with K = 12 for mixed-precision Adam."""
    assert f.model_state_bytes_per_param(dp=1, zero_stage=0) == 16
    assert (f.PARAM_BYTES, f.GRAD_BYTES, f.OPTIMIZER_BYTES) == (2, 2, 12)
    one = {"tp": 1, "pp": 1, "dp": 1, "zero_stage": 0}
    assert f.param_bytes(1e9, **one) + f.grad_bytes(1e9, **one) + f.optimizer_bytes(1e9, **one) == 16e9


@pytest.mark.parametrize(("stage", "published_gb"), [(0, 120), (1, 31.4), (2, 16.6), (3, 1.9)])
def test_zero_figure_1_a_7_5b_model_on_64_gpus(stage: int, published_gb: float) -> None:
    """ZeRO's figure 1: Ψ = 7.5B, N_d = 64, K = 12 gives 120 GB, 31.4 GB, 16.6 GB and 1.9 GB
    per device for the baseline and stages 1, 2 and 3."""
    shard = {"tp": 1, "pp": 1, "dp": 64, "zero_stage": stage}
    total = (f.param_bytes(7.5e9, **shard) + f.grad_bytes(7.5e9, **shard)
             + f.optimizer_bytes(7.5e9, **shard))
    assert total / GB == pytest.approx(published_gb, abs=0.05)


# GPT-3 175B as Korthikanti et al. train it (their table 3): a = 96, h = 12288, s = 2048,
# L = 96, tensor-parallel t = 8, micro-batch b = 1.
GPT3 = {"seq_len": 2048, "micro_batch": 1, "hidden": 12288, "heads": 96}


def test_korthikanti_gpt3_attention_term_is_80() -> None:
    """Section 4.1: for GPT-3, 5as/h = 5 · 96 · 2048 / 12288 = 80, more than the 34 of the
    linear part: without a fused attention the scores dominate."""
    sbh = 2048 * 12288
    no_parallelism = f.activation_bytes_per_layer(**GPT3, tp=1, sequence_parallel=False, recompute="none")
    assert no_parallelism == sbh * (34 + 80)
    assert no_parallelism / GB == pytest.approx(2.869, abs=0.001)  # 2.87 GB per layer


@pytest.mark.parametrize(("sp", "recompute", "per_layer_mb", "coefficient"), [
    # Table 2, with t = 8: sbh · coefficient bytes per layer.
    (False, "none", 578.8, 10 + 24 / 8 + 80 / 8),   # tensor parallel baseline: 23
    (True, "none", 358.6, (34 + 80) / 8),           # + sequence parallel: 14.25
    (False, "selective", 327.2, 10 + 24 / 8),       # + selective recompute: 13
    (True, "selective", 107.0, 34 / 8),             # both: 4.25
    (True, "full", 6.29, 2 / 8),                    # full recompute, sequence-parallel input
    (False, "full", 50.3, 2),                       # full recompute: the layer input alone
])
def test_korthikanti_table_2_for_gpt3_175b(sp: bool, recompute: str, per_layer_mb: float,
                                           coefficient: float) -> None:
    per_layer = f.activation_bytes_per_layer(**GPT3, tp=8, sequence_parallel=sp, recompute=recompute)
    assert per_layer == pytest.approx(2048 * 12288 * coefficient)
    assert per_layer / 1e6 == pytest.approx(per_layer_mb, rel=0.002)


def test_korthikanti_sequence_parallel_and_selective_recompute_cut_activations_5x() -> None:
    """The abstract: the two techniques together reduce activation memory about 5× against
    tensor parallelism alone (23 / 4.25 = 5.4 for GPT-3)."""
    baseline = f.activation_bytes_per_layer(**GPT3, tp=8, sequence_parallel=False, recompute="none")
    both = f.activation_bytes_per_layer(**GPT3, tp=8, sequence_parallel=True, recompute="selective")
    assert baseline / both == pytest.approx(5.41, abs=0.01)


def test_palm_540b_mfu_arithmetic() -> None:
    """PaLM, appendix B: 238.3K tokens/s on 6144 TPU v4 chips of 275 TFLOP/s is 45.7 % MFU
    counting 6N FLOPs per token, 46.2 % with self-attention's 12·L·H·Q·T (L = 118 layers,
    H = 48 heads, Q = 256 per head, T = 2048)."""
    six_n = 6 * 540e9
    without = f.model_flops_utilization(tokens_per_s=238.3e3, flops_per_token=six_n, chips=6144,
                                        peak_flops_per_chip=275e12)
    attention = f.attention_flops_per_token(layers=118, heads=48, head_dim=256, seq_len=2048)
    with_attention = f.model_flops_utilization(tokens_per_s=238.3e3, flops_per_token=six_n + attention,
                                               chips=6144, peak_flops_per_chip=275e12)
    assert round(without * 100, 1) == 45.7
    assert round(with_attention * 100, 1) == 46.2
    assert six_n == f.training_flops(540e9, 1)


# The 70B example of docs/planner.md, "A worked example", computed there by hand.
WORKED = {
    "model": {"params": 70e9, "layers": 80, "hidden": 8192, "heads": 64, "seq_len": 4096},
    "cluster": {"gpus": 512, "gpus_per_node": 8, "gpu_memory_gb": 80, "peak_tflops": 989,
                "mtbf_hours": 50000},
    "layout": {"dp": 16, "zero_stage": 1, "tp": 8, "pp": 4, "micro_batch": 1, "global_batch": 1024,
               "sequence_parallel": True, "recompute": "selective", "interleave": 1},
    "training": {"tokens": 2e12, "mfu": 0.4, "checkpoint_seconds": 60},
}


def test_the_70b_example_worked_by_hand_in_the_docs() -> None:
    out = plan(request=PlanIn.model_validate(WORKED))
    assert out.memory.params == pytest.approx(4.375e9)
    assert out.memory.grads == pytest.approx(4.375e9)
    assert out.memory.optimizer == pytest.approx(1.640625e9)
    assert out.memory.activations == pytest.approx(11_408_506_880)
    assert out.memory.total / GB == pytest.approx(21.80, abs=0.005)
    assert out.memory.fits
    assert out.flops.per_step == pytest.approx(1.76160768e18)
    assert out.flops.total == pytest.approx(8.4e23)
    assert out.time.step_s == pytest.approx(8.697, abs=0.001)
    assert out.time.train_days == pytest.approx(48.0, abs=0.05)
    assert out.pipeline.micro_batches == 64
    assert out.pipeline.bubble_fraction == pytest.approx(3 / 67)
    assert out.comm.dp_bytes_per_step == pytest.approx(8.203125e9)
    assert out.checkpoint.interval_s == pytest.approx(6495.19, abs=0.01)
    # The same text is in the docs, so the two cannot drift apart.
    from pathlib import Path
    doc = (Path(__file__).resolve().parents[2] / "docs" / "planner.md").read_text()
    for figure in ("21.80 GB", "8.70 s", "48.0 days", "4.48 %", "8.20 GB", "6,495 s"):
        assert figure in doc, figure


def test_the_bubble_with_and_without_interleaving() -> None:
    """GPipe's (K − 1)/(M + K − 1); Megatron's interleaving divides the fill and drain by v."""
    assert f.bubble_fraction(pp=4, micro_batches=16) == pytest.approx(3 / 19)
    assert f.bubble_fraction(pp=4, micro_batches=16, interleave=2) == pytest.approx(3 / 35)
    assert f.bubble_fraction(pp=1, micro_batches=16) == 0


def test_1f1b_holds_at_most_pp_micro_batches() -> None:
    assert f.micro_batches_in_flight(pp=4, micro_batches=64) == 4
    assert f.micro_batches_in_flight(pp=8, micro_batches=3) == 3
    assert f.micro_batches_in_flight(pp=1, micro_batches=64) == 1


def test_zero_3_sends_one_and_a_half_times_plain_data_parallelism() -> None:
    """ZeRO, section 7: stages 1 and 2 move as much as DP's all-reduce (2Ψ), stage 3 3Ψ."""
    base = {"tp": 1, "pp": 1, "dp": 64}
    plain = f.dp_bytes_per_step(1e9, **base, zero_stage=0)
    assert plain == pytest.approx(2 * 63 / 64 * 2e9)
    assert f.dp_bytes_per_step(1e9, **base, zero_stage=2) == plain
    assert f.dp_bytes_per_step(1e9, **base, zero_stage=3) == pytest.approx(1.5 * plain)
    assert f.dp_bytes_per_step(1e9, **{**base, "dp": 1}, zero_stage=3) == 0


def test_young_daly_interval() -> None:
    """√(2 · 90 s · 6 h) = 1,972 s, 32.9 minutes: the bank's ckpt-young-daly-interval, variant 0."""
    tau = f.checkpoint_interval_seconds(checkpoint_seconds=90, mtbf_seconds=6 * 3600)
    assert tau == pytest.approx(1971.8, abs=0.1)
    assert f.job_mtbf_seconds(mtbf_hours=50_000, gpus=512) == pytest.approx(351_562.5)


def test_activation_recompute_mode_is_checked() -> None:
    with pytest.raises(ValueError, match="recompute"):
        f.activation_bytes_per_layer(**GPT3, tp=8, sequence_parallel=True, recompute="some")


def test_pipeline_sends_grow_with_interleaving() -> None:
    one = f.pp_bytes_per_step(seq_len=64, micro_batch=4, hidden=63, pp=2, micro_batches=4)
    two = f.pp_bytes_per_step(seq_len=64, micro_batch=4, hidden=63, pp=2, micro_batches=4, interleave=2)
    assert one == 4 * 64 * 4 * 63 * 2
    assert two == 3 * one
    assert math.isclose(f.tp_bytes_per_layer(seq_len=2048, micro_batch=1, hidden=12288, tp=8),
                        4 * 2 * 7 / 8 * 2048 * 12288 * 2)
