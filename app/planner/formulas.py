"""The formulas of scale: one pure function per quantity, each citing where it comes from.

Units are SI throughout: bytes (not GB), seconds, FLOPs, counts; a GPU's peak is in
TFLOP/s because spec sheets give it so. Nothing here keeps state or reads settings: the
planner's service, its page and API, "measure it small" and the bank's computed questions
(through app.questions.variants, under the names in `BANK_FUNCTIONS`) all call these, so
that they cannot disagree. docs/planner.md states the conventions and works an example.

Sources, cited by the short names below:

- ZeRO: Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter
  Models", SC 2020 (arXiv:1910.02054), sections 3.1 and 7.
- Korthikanti: Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
  Models", MLSys 2023 (arXiv:2205.05198), section 4 and table 2.
- Megatron-PP: Narayanan et al., "Efficient Large-Scale Language Model Training on GPU
  Clusters Using Megatron-LM", SC 2021 (arXiv:2104.04473), section 2.2.
- GPipe: Huang et al., "GPipe: Efficient Training of Giant Neural Networks using Pipeline
  Parallelism", NeurIPS 2019 (arXiv:1811.06965), section 2.2.
- Kaplan: Kaplan et al., "Scaling Laws for Neural Language Models", 2020
  (arXiv:2001.08361), section 2.1.
- PaLM: Chowdhery et al., "PaLM: Scaling Language Modeling with Pathways", 2022
  (arXiv:2204.02311), appendix B.
- Ring: Patarasuk and Yuan, "Bandwidth optimal all-reduce algorithms for clusters of
  workstations", JPDC 69(2), 2009.
- Young: J. W. Young, "A first order approximation to the optimum checkpoint interval",
  CACM 17(9), 1974; Daly: J. T. Daly, "A higher order estimate of the optimum
  checkpoint interval for restart dumps", FGCS 22(3), 2006.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

# Mixed-precision Adam (ZeRO 3.1): a bf16 parameter (2 bytes) and its bf16 gradient (2),
# and in the optimizer an fp32 master copy and two fp32 moments (4 + 4 + 4).
PARAM_BYTES = 2
GRAD_BYTES = 2
OPTIMIZER_BYTES = 12
# Activations are 16-bit values in Korthikanti's count (dropout masks are 1 byte, folded in).
ACTIVATION_BYTES = 2
RECOMPUTE_MODES = ("none", "selective", "full")
SECONDS_PER_DAY = 86_400
SECONDS_PER_HOUR = 3_600
TERA = 1e12
GIGA = 1e9


# ---------------------------------------------------------------- model state per GPU

def params_per_gpu(params: float, *, tp: int, pp: int) -> float:
    """The parameters one GPU's model shard holds: params / (tp · pp).

    Tensor parallelism splits every layer's matrices tp ways and pipeline parallelism
    gives each stage layers / pp of the layers (Megatron-PP, section 2). Treats the
    model as evenly divisible: the embedding and output layer, which sit on the first and
    last stage and are replicated or split differently, are ignored.
    """
    return params / (tp * pp)


def param_bytes(params: float, *, tp: int, pp: int, dp: int, zero_stage: int,
                bytes_per_param: float = PARAM_BYTES) -> float:
    """Bytes of parameters on one GPU: 2 per parameter of its shard, divided by dp under
    ZeRO-3 (ZeRO, section 3.1 and 5: stage 3, P_os+g+p, partitions the parameters too)."""
    share = params_per_gpu(params, tp=tp, pp=pp) * bytes_per_param
    return share / dp if zero_stage >= 3 else share


def grad_bytes(params: float, *, tp: int, pp: int, dp: int, zero_stage: int,
               bytes_per_param: float = GRAD_BYTES) -> float:
    """Bytes of gradients on one GPU: 2 per parameter of its shard, divided by dp under
    ZeRO-2 and ZeRO-3 (ZeRO, section 5: stage 2, P_os+g, partitions the gradients)."""
    share = params_per_gpu(params, tp=tp, pp=pp) * bytes_per_param
    return share / dp if zero_stage >= 2 else share


def optimizer_bytes(params: float, *, tp: int, pp: int, dp: int, zero_stage: int,
                    bytes_per_param: float = OPTIMIZER_BYTES) -> float:
    """Bytes of optimizer state on one GPU: Adam's fp32 master weights and two fp32 moments,
    12 per parameter of its shard, divided by dp from ZeRO-1 on (ZeRO, section 3.1: K = 12
    for mixed-precision Adam; section 5: stage 1, P_os, partitions the optimizer state)."""
    share = params_per_gpu(params, tp=tp, pp=pp) * bytes_per_param
    return share / dp if zero_stage >= 1 else share


def model_state_bytes(params: float, *, tp: int, pp: int, dp: int, zero_stage: int) -> float:
    """Bytes of model state on one GPU: parameters + gradients + optimizer state, 16 per
    parameter of its shard before ZeRO divides any of them (ZeRO, sections 3.1 and 5)."""
    shard = {"tp": tp, "pp": pp, "dp": dp, "zero_stage": zero_stage}
    return (param_bytes(params, **shard) + grad_bytes(params, **shard)
            + optimizer_bytes(params, **shard))


def model_state_bytes_per_param(*, dp: int, zero_stage: int) -> float:
    """Bytes of model state per parameter of a GPU's tensor/pipeline shard: 2 + 2 + 12 = 16
    without ZeRO (ZeRO, section 3.1: "(2 + 2 + K)Ψ", K = 12), each part divided by dp
    once its stage partitions it."""
    return (param_bytes(1, tp=1, pp=1, dp=dp, zero_stage=zero_stage)
            + grad_bytes(1, tp=1, pp=1, dp=dp, zero_stage=zero_stage)
            + optimizer_bytes(1, tp=1, pp=1, dp=dp, zero_stage=zero_stage))


# ---------------------------------------------------------------- activations

def activation_bytes_per_layer(*, seq_len: int, micro_batch: int, hidden: int, tp: int,
                               sequence_parallel: bool, recompute: str, heads: int | None = None) -> float:
    """Bytes of activations one transformer layer keeps for backward, per micro-batch
    (Korthikanti, section 4 and table 2; s = seq_len, b = micro_batch, h = hidden,
    a = heads, t = tp; 16-bit activations, 1-byte dropout masks):

    - recompute "none": s·b·h·(34 + 5·a·s/h) / t with sequence parallelism,
      s·b·h·(10 + 24/t + 5·a·s/(h·t)) without (the layer norms' and dropouts' 10·s·b·h
      are then replicated on every tensor rank);
    - "selective" (recompute only the attention's softmax, its dropout and the a·s²
      scores): s·b·h·34 / t with sequence parallelism, s·b·h·(10 + 24/t) without;
    - "full" (keep only each layer's input, recompute the layer in backward):
      2·s·b·h / t with sequence parallelism, 2·s·b·h without.

    `heads` matters only without recomputation (the a·s² scores); it may be left out otherwise.
    """
    s, b, h, a, t = seq_len, micro_batch, hidden, heads, tp
    sbh = s * b * h
    if recompute == "none":
        if a is None:
            raise ValueError("recompute 'none' keeps the attention scores: give heads")
        if sequence_parallel:
            return sbh * (34 + 5 * a * s / h) / t
        return sbh * (10 + 24 / t + 5 * a * s / (h * t))
    if recompute == "selective":
        return sbh * 34 / t if sequence_parallel else sbh * (10 + 24 / t)
    if recompute == "full":
        return 2 * sbh / t if sequence_parallel else 2 * sbh
    raise ValueError(f"recompute must be one of {', '.join(RECOMPUTE_MODES)}, not {recompute!r}")


def layers_per_stage(layers: int, *, pp: int) -> float:
    """The layers one pipeline stage holds: layers / pp (Megatron-PP, section 2.2)."""
    return layers / pp


def micro_batches(global_batch: int, *, dp: int, micro_batch: int) -> float:
    """Micro-batches each pipeline runs per step: m = global_batch / (dp · micro_batch)
    (Megatron-PP, section 2.2: B = b · m per data-parallel replica)."""
    return global_batch / (dp * micro_batch)


def micro_batches_in_flight(*, pp: int, micro_batches: float) -> float:
    """Micro-batches whose activations the first stage holds at once under 1F1B: min(pp, m)
    with pp > 1, one without a pipeline (Megatron-PP, section 2.2.1: 1F1B limits the
    in-flight micro-batches to the pipeline depth p; GPipe keeps all m)."""
    return min(pp, micro_batches) if pp > 1 else 1


def activation_bytes(*, seq_len: int, micro_batch: int, hidden: int, heads: int, tp: int,
                     sequence_parallel: bool, recompute: str, layers: int, pp: int,
                     micro_batches: float) -> float:
    """Activation bytes on the first pipeline stage, its fullest: the per-layer, per-micro-
    batch bytes (Korthikanti) × the stage's layers / pp × the micro-batches in flight
    under 1F1B (Megatron-PP)."""
    per_layer = activation_bytes_per_layer(
        seq_len=seq_len, micro_batch=micro_batch, hidden=hidden, heads=heads, tp=tp,
        sequence_parallel=sequence_parallel, recompute=recompute)
    return (per_layer * layers_per_stage(layers, pp=pp)
            * micro_batches_in_flight(pp=pp, micro_batches=micro_batches))


def fits(total_bytes: float, *, gpu_memory_gb: float) -> bool:
    """Whether a GPU of gpu_memory_gb (10⁹ bytes, as spec sheets count) holds total_bytes."""
    return total_bytes <= gpu_memory_gb * GIGA


# ---------------------------------------------------------------- FLOPs, time, MFU

def training_flops(params: float, tokens: float) -> float:
    """FLOPs to train on `tokens` tokens: 6 · N · D, 2 per parameter per token forward and
    4 backward (Kaplan, section 2.1: C ≈ 6N per token). Leaves out attention's own
    s-dependent FLOPs (see `attention_flops_per_token`) and any recomputation."""
    return 6 * params * tokens


def tokens_per_step(*, global_batch: int, seq_len: int) -> float:
    """Tokens one optimizer step consumes: global_batch sequences × seq_len tokens."""
    return global_batch * seq_len


def cluster_flops_per_second(*, gpus: int, peak_tflops: float) -> float:
    """The cluster's peak: gpus × the GPU's dense bf16 peak (TFLOP/s × 10¹²)."""
    return gpus * peak_tflops * TERA


def step_seconds(flops_per_step: float, *, gpus: int, peak_tflops: float, mfu: float) -> float:
    """Seconds per step at a model FLOPs utilisation: FLOPs / (gpus · peak · MFU) (PaLM,
    appendix B: MFU is the model's FLOPs per second over the cluster's peak)."""
    return flops_per_step / (cluster_flops_per_second(gpus=gpus, peak_tflops=peak_tflops) * mfu)


def train_days(total_flops: float, *, gpus: int, peak_tflops: float, mfu: float) -> float:
    """Days to train: total FLOPs / (gpus · peak · MFU) / 86,400 (PaLM, appendix B)."""
    return step_seconds(total_flops, gpus=gpus, peak_tflops=peak_tflops, mfu=mfu) / SECONDS_PER_DAY


def tokens_per_second(*, tokens_per_step: float, step_s: float) -> float:
    """Training throughput: tokens per step / seconds per step."""
    return tokens_per_step / step_s


def model_flops_utilization(*, tokens_per_s: float, flops_per_token: float, chips: int,
                            peak_flops_per_chip: float) -> float:
    """MFU: the model's FLOPs per second at the observed throughput over the cluster's peak
    (PaLM, appendix B: 238.3K tokens/s × 6 × 540B / (275 TFLOP/s × 6144) = 45.7 %)."""
    return tokens_per_s * flops_per_token / (chips * peak_flops_per_chip)


def attention_flops_per_token(*, layers: int, heads: int, head_dim: int, seq_len: int) -> float:
    """The self-attention FLOPs per token that 6·N leaves out: 12 · L · H · Q · T (PaLM,
    appendix B: the QK^T and attention-times-V matmuls, forward and backward, at full
    sequence length T; with them PaLM 540B's MFU is 46.2 % instead of 45.7 %)."""
    return 12 * layers * heads * head_dim * seq_len


# ---------------------------------------------------------------- the pipeline bubble

def bubble_fraction(*, pp: int, micro_batches: float, interleave: int = 1) -> float:
    """The share of a step each pipeline stage sits idle: (pp − 1) / (v · m + pp − 1) with v
    chunks per GPU (GPipe, section 2.2: (K − 1)/(M + K − 1); Megatron-PP, section 2.2.2:
    interleaving v model chunks per device shrinks the fill and drain v-fold)."""
    return (pp - 1) / (interleave * micro_batches + pp - 1)


# ---------------------------------------------------------------- bytes on the wire

def ring_all_reduce_bytes(size_bytes: float, *, ranks: int) -> float:
    """Bytes each rank sends in a ring all-reduce of size_bytes: 2 · (n − 1)/n · size, a
    reduce-scatter then an all-gather (Ring: bandwidth-optimal all-reduce)."""
    return 2 * (ranks - 1) / ranks * size_bytes


def all_gather_bytes(size_bytes: float, *, ranks: int) -> float:
    """Bytes each rank sends in a ring all-gather whose result is size_bytes: (n − 1)/n · size
    (Ring; half of an all-reduce)."""
    return (ranks - 1) / ranks * size_bytes


def reduce_scatter_bytes(size_bytes: float, *, ranks: int) -> float:
    """Bytes each rank sends in a ring reduce-scatter of a size_bytes input: (n − 1)/n · size
    (Ring; the other half of an all-reduce)."""
    return (ranks - 1) / ranks * size_bytes


def all_to_all_bytes(size_bytes: float, *, ranks: int) -> float:
    """Bytes each rank sends in an all-to-all of its size_bytes buffer: it keeps its own 1/n
    and sends the rest, (n − 1)/n · size (what expert and Ulysses sequence parallelism move)."""
    return (ranks - 1) / ranks * size_bytes


def dp_bytes_per_step(params: float, *, tp: int, pp: int, dp: int, zero_stage: int,
                      bytes_per_grad: float = GRAD_BYTES) -> float:
    """Bytes each GPU sends per step for data parallelism over its shard's bf16 gradients
    (ZeRO, section 7): ZeRO 0–2, a ring all-reduce, 2 · (dp − 1)/dp · 2 · params/(tp · pp)
    (ZeRO-1/2's reduce-scatter plus all-gather of the updated parameters is the same
    volume); ZeRO-3, the parameters all-gathered in forward and again in backward and the
    gradients reduce-scattered, 3 · (dp − 1)/dp · 2 · params/(tp · pp) (1.5× plain DP).
    Counts one gathering per step, as for one micro-batch: FSDP that frees the gathered
    parameters between micro-batches gathers them again for each."""
    size = bytes_per_grad * params_per_gpu(params, tp=tp, pp=pp)
    if zero_stage >= 3:
        return (2 * all_gather_bytes(size, ranks=dp) + reduce_scatter_bytes(size, ranks=dp))
    return ring_all_reduce_bytes(size, ranks=dp)


def tp_bytes_per_layer(*, seq_len: int, micro_batch: int, hidden: int, tp: int,
                       collectives: int = 4, bytes_per_value: float = ACTIVATION_BYTES) -> float:
    """Bytes each GPU sends for tensor parallelism in one layer and micro-batch: `collectives`
    ring all-reduces of the s·b·h activations, 4 per transformer layer (attention and MLP,
    forward and backward; Korthikanti, section 4.2.2: sequence parallelism replaces each by
    an all-gather and a reduce-scatter of the same total volume)."""
    return collectives * ring_all_reduce_bytes(seq_len * micro_batch * hidden * bytes_per_value,
                                               ranks=tp)


def pp_bytes_per_step(*, seq_len: int, micro_batch: int, hidden: int, pp: int,
                      micro_batches: float, interleave: int = 1,
                      bytes_per_value: float = ACTIVATION_BYTES) -> float:
    """Bytes a pipeline GPU sends per step, on average: each of the v · pp − 1 boundaries
    between model chunks is crossed by every micro-batch's activations forward and by their
    gradients backward, s·b·h values each time, shared among pp GPUs:
    2 · m · (v · pp − 1) / pp · s·b·h · 2 (Megatron-PP, section 2.2.2: interleaving
    multiplies the point-to-point traffic by about v). The first and last stages send half
    of a middle stage's."""
    crossings = 2 * micro_batches * (interleave * pp - 1)
    return crossings / pp * seq_len * micro_batch * hidden * bytes_per_value


def transfer_seconds(size_bytes: float, *, bandwidth_gb_per_s: float) -> float:
    """Seconds to send size_bytes at bandwidth_gb_per_s (10⁹ bytes per second, one way)."""
    return size_bytes / (bandwidth_gb_per_s * GIGA)


def exposed_seconds(busy_seconds: float, *, hidden_behind_s: float) -> float:
    """The part of a communication that computation does not hide: max(0, comm − overlap)."""
    return max(0.0, busy_seconds - hidden_behind_s)


# ---------------------------------------------------------------- checkpoints

def job_mtbf_seconds(*, mtbf_hours: float, gpus: int) -> float:
    """The job's mean time between failures: one GPU's MTBF / gpus (any GPU's failure stops
    the job; failures independent, at a steady rate)."""
    return mtbf_hours * SECONDS_PER_HOUR / gpus


def checkpoint_interval_seconds(*, checkpoint_seconds: float, mtbf_seconds: float) -> float:
    """The Young/Daly first-order optimum: τ = √(2 · C · MTBF) (Young 1974; Daly 2006 gives
    the higher-order correction, needed only when C is not ≪ MTBF)."""
    return math.sqrt(2 * checkpoint_seconds * mtbf_seconds)


def checkpoint_overhead_fraction(*, checkpoint_seconds: float, interval_s: float, mtbf_seconds: float,
                                 restart_seconds: float = 0.0) -> float:
    """The share of time lost to checkpoints and failures at an interval τ: C/τ for writing
    them, and per failure half an interval of lost work plus the restart, (τ/2 + R)/MTBF
    (Young 1974's first-order loss, the function √(2·C·MTBF) minimises; goodput is 1 minus it)."""
    return checkpoint_seconds / interval_s + (interval_s / 2 + restart_seconds) / mtbf_seconds


# ---------------------------------------------------------------- for the bank's formulas

# The functions a question's `compute` may call, by these names (app.questions.variants
# adds them to the sandbox; docs/question-format.md, "Computed keys"). Keyword arguments
# only, so a formula names what each number is.
BANK_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "plan_model_state_bytes": model_state_bytes,
    "plan_param_bytes": param_bytes,
    "plan_grad_bytes": grad_bytes,
    "plan_optimizer_bytes": optimizer_bytes,
    "plan_activation_bytes_per_layer": activation_bytes_per_layer,
    "plan_micro_batches": micro_batches,
    "plan_micro_batches_in_flight": micro_batches_in_flight,
    "plan_training_flops": training_flops,
    "plan_attention_flops_per_token": attention_flops_per_token,
    "plan_step_seconds": step_seconds,
    "plan_train_days": train_days,
    "plan_mfu": model_flops_utilization,
    "plan_bubble_fraction": bubble_fraction,
    "plan_ring_all_reduce_bytes": ring_all_reduce_bytes,
    "plan_all_gather_bytes": all_gather_bytes,
    "plan_reduce_scatter_bytes": reduce_scatter_bytes,
    "plan_all_to_all_bytes": all_to_all_bytes,
    "plan_dp_bytes_per_step": dp_bytes_per_step,
    "plan_tp_bytes_per_layer": tp_bytes_per_layer,
    "plan_checkpoint_interval_seconds": checkpoint_interval_seconds,
    "plan_checkpoint_overhead_fraction": checkpoint_overhead_fraction,
}
