"""The planner's API contract (POST /api/v1/plan), a stable shape people script against.

Request: a model, a cluster, a layout and a training run. Response: bytes per GPU,
FLOPs, seconds and counts. docs/planner.md states every formula; fields beyond the
contract's (`active_params`, the bandwidths) are optional and change no contract value
unless sent. Never rename or drop a field here: add new ones with defaults.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _In(BaseModel):
    # JSON has no infinities; Python's parser accepts "Infinity" and "NaN": refuse them.
    model_config = ConfigDict(allow_inf_nan=False)


class ModelIn(_In):
    params: float = Field(gt=0, le=1e16, description="Parameters of the whole model.")
    layers: int = Field(ge=1, le=100_000, description="Transformer layers.")
    hidden: int = Field(ge=1, le=10_000_000, description="Hidden size h.")
    heads: int = Field(ge=1, le=1_000_000, description="Attention heads a.")
    seq_len: int = Field(ge=1, le=100_000_000, description="Sequence length s, tokens.")
    active_params: float | None = Field(
        None, gt=0, le=1e16,
        description="Optional, for a mixture of experts: the parameters each token passes "
                    "through. FLOPs use it instead of `params`; memory still counts `params`.")


class ClusterIn(_In):
    gpus: int = Field(ge=1, le=100_000_000, description="GPUs in the job.")
    gpus_per_node: int = Field(ge=1, le=100_000, description="GPUs per node.")
    gpu_memory_gb: float = Field(gt=0, le=1_000_000, description="Memory of one GPU, 10⁹ bytes.")
    peak_tflops: float = Field(gt=0, le=1e9, description="One GPU's dense bf16 peak, TFLOP/s.")
    mtbf_hours: float = Field(gt=0, le=1e12,
                              description="Mean time between failures of one GPU, hours.")
    nvlink_gb_s: float | None = Field(
        None, gt=0, le=1e9,
        description="Optional: NVLink bandwidth per GPU as spec sheets give it (both "
                    "directions, GB/s). Used by the /plan page's communication time only.")
    network_gbit_s: float | None = Field(
        None, gt=0, le=1e9,
        description="Optional: network bandwidth per GPU, Gbit/s. Used by the /plan page's "
                    "communication time only.")


class LayoutIn(_In):
    dp: int = Field(ge=1, le=100_000_000, description="Data-parallel degree.")
    zero_stage: int = Field(ge=0, le=3, description="ZeRO stage 0-3 over the data-parallel group.")
    tp: int = Field(ge=1, le=100_000, description="Tensor-parallel degree.")
    pp: int = Field(ge=1, le=100_000, description="Pipeline-parallel degree.")
    micro_batch: int = Field(ge=1, le=100_000_000, description="Sequences per micro-batch.")
    global_batch: int = Field(ge=1, le=1_000_000_000_000, description="Sequences per step.")
    sequence_parallel: bool = Field(description="Megatron sequence parallelism with tp.")
    recompute: Literal["none", "selective", "full"] = Field(
        description="Activation recomputation: none, selective (attention) or full (each layer).")
    interleave: int = Field(1, ge=1, le=1_000, description="Model chunks per GPU (interleaved 1F1B).")


class TrainingIn(_In):
    tokens: float = Field(gt=0, le=1e18, description="Tokens to train on.")
    mfu: float = Field(gt=0, le=1, description="Model FLOPs utilisation assumed, 0-1.")
    checkpoint_seconds: float = Field(gt=0, le=1e9,
                                      description="Seconds training stops for one checkpoint.")


class PlanIn(_In):
    model: ModelIn
    cluster: ClusterIn
    layout: LayoutIn
    training: TrainingIn


class MemoryOut(BaseModel):
    params: float = Field(description="Parameter bytes per GPU.")
    grads: float = Field(description="Gradient bytes per GPU.")
    optimizer: float = Field(description="Optimizer-state bytes per GPU.")
    activations: float = Field(description="Activation bytes on the first pipeline stage's GPUs.")
    total: float = Field(description="The sum of the four, bytes per GPU.")
    fits: bool = Field(description="total <= gpu_memory_gb × 10⁹.")


class FlopsOut(BaseModel):
    per_step: float = Field(description="6 × params × global_batch × seq_len.")
    total: float = Field(description="6 × params × tokens.")


class TimeOut(BaseModel):
    step_s: float = Field(description="Seconds per step at the assumed MFU.")
    train_days: float = Field(description="Days to train on all the tokens at the assumed MFU.")


class PipelineOut(BaseModel):
    micro_batches: int = Field(description="global_batch / (dp × micro_batch), per pipeline.")
    bubble_fraction: float = Field(description="(pp − 1) / (interleave × micro_batches + pp − 1).")


class CommOut(BaseModel):
    dp_bytes_per_step: float = Field(description="Bytes each GPU sends per step for data "
                                                 "parallelism (ring all-reduce; ZeRO-3: 1.5×).")


class CheckpointOut(BaseModel):
    interval_s: float = Field(description="Young/Daly: √(2 × checkpoint_seconds × the job's MTBF).")


class PlanOut(BaseModel):
    memory: MemoryOut
    flops: FlopsOut
    time: TimeOut
    pipeline: PipelineOut
    comm: CommOut
    checkpoint: CheckpointOut


# ---------------------------------------------------------------- the /plan page's form

class FormField(BaseModel):
    """One input of the /plan form: its name, where its value goes in a PlanIn, and how the
    form scales it (the form asks for billions of parameters, the API for parameters)."""

    name: str
    loc: tuple[str, str]
    label: str
    kind: Literal["int", "float", "bool", "choice"] = "int"
    scale: float = 1.0
    optional: bool = False
    unit: str = ""
    choices: tuple[str, ...] = ()


FORM_FIELDS: tuple[FormField, ...] = (
    FormField(name="params_b", loc=("model", "params"), label="Parameters", kind="float", scale=1e9,
              unit="billion"),
    FormField(name="active_params_b", loc=("model", "active_params"), label="Active per token (MoE)",
              kind="float", scale=1e9, optional=True, unit="billion"),
    FormField(name="layers", loc=("model", "layers"), label="Layers"),
    FormField(name="hidden", loc=("model", "hidden"), label="Hidden size h"),
    FormField(name="heads", loc=("model", "heads"), label="Attention heads a"),
    FormField(name="seq_len", loc=("model", "seq_len"), label="Sequence length s", unit="tokens"),
    FormField(name="gpus", loc=("cluster", "gpus"), label="GPUs"),
    FormField(name="gpus_per_node", loc=("cluster", "gpus_per_node"), label="GPUs per node"),
    FormField(name="gpu_memory_gb", loc=("cluster", "gpu_memory_gb"), label="Memory per GPU",
              kind="float", unit="GB"),
    FormField(name="peak_tflops", loc=("cluster", "peak_tflops"), label="Peak dense bf16",
              kind="float", unit="TFLOP/s"),
    FormField(name="nvlink_gb_s", loc=("cluster", "nvlink_gb_s"), label="NVLink", kind="float",
              optional=True, unit="GB/s"),
    FormField(name="network_gbit_s", loc=("cluster", "network_gbit_s"), label="Network per GPU",
              kind="float", optional=True, unit="Gbit/s"),
    FormField(name="mtbf_hours", loc=("cluster", "mtbf_hours"), label="MTBF of one GPU",
              kind="float", unit="hours"),
    FormField(name="dp", loc=("layout", "dp"), label="Data parallel dp"),
    FormField(name="tp", loc=("layout", "tp"), label="Tensor parallel tp"),
    FormField(name="pp", loc=("layout", "pp"), label="Pipeline parallel pp"),
    FormField(name="zero_stage", loc=("layout", "zero_stage"), label="ZeRO stage", kind="choice",
              choices=("0", "1", "2", "3")),
    FormField(name="micro_batch", loc=("layout", "micro_batch"), label="Micro-batch b",
              unit="sequences"),
    FormField(name="global_batch", loc=("layout", "global_batch"), label="Global batch",
              unit="sequences"),
    FormField(name="interleave", loc=("layout", "interleave"), label="Chunks per GPU v"),
    FormField(name="sequence_parallel", loc=("layout", "sequence_parallel"),
              label="Sequence parallelism", kind="bool"),
    FormField(name="recompute", loc=("layout", "recompute"), label="Recompute", kind="choice",
              choices=("none", "selective", "full")),
    FormField(name="tokens_t", loc=("training", "tokens"), label="Training tokens", kind="float",
              scale=1e12, unit="trillion"),
    FormField(name="mfu_pct", loc=("training", "mfu"), label="MFU", kind="float", scale=0.01, unit="%"),
    FormField(name="checkpoint_seconds", loc=("training", "checkpoint_seconds"),
              label="One checkpoint stops training for", kind="float", unit="s"),
)
FIELD_BY_LOC = {field.loc: field for field in FORM_FIELDS}
