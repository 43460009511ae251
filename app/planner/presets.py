"""Presets for the /plan page: public model configurations and GPU spec sheets, each cited.

A preset only fills the form; the learner can change every number afterwards. Model
sizes are the papers' (or the released configs') totals; GPU peaks are dense bf16 tensor
throughput (spec sheets print twice that "with sparsity"), memory in 10⁹ bytes, NVLink as
the sheets give it (both directions together) and the network per GPU in Gbit/s (one
InfiniBand adapter per GPU in the vendor's own 8-GPU system).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelPreset:
    key: str
    name: str
    params: float
    layers: int
    hidden: int
    heads: int
    seq_len: int
    source: str
    url: str
    # Mixture of experts: the parameters one token passes through (its FLOPs); None for dense.
    active_params: float | None = None
    note: str = ""


@dataclass(frozen=True)
class GpuPreset:
    key: str
    name: str
    memory_gb: float
    peak_tflops: float
    nvlink_gb_s: float
    network_gbit_s: float
    source: str
    url: str
    note: str = ""


MODELS: tuple[ModelPreset, ...] = (
    ModelPreset(
        key="llama2-7b", name="Llama 2 7B", params=6.74e9, layers=32, hidden=4096, heads=32,
        seq_len=4096,
        source="Touvron et al., Llama 2 (arXiv:2307.09288), table 1 (context 4k); the architecture "
               "of LLaMA 7B, Touvron et al. (arXiv:2302.13971), table 2",
        url="https://arxiv.org/abs/2307.09288"),
    ModelPreset(
        key="llama3-8b", name="Llama 3.1 8B", params=8.03e9, layers=32, hidden=4096, heads=32,
        seq_len=8192,
        source="Llama Team, The Llama 3 Herd of Models (arXiv:2407.21783), table 3; pre-trained "
               "at sequence length 8,192 (section 3.4.1)",
        url="https://arxiv.org/abs/2407.21783"),
    ModelPreset(
        key="llama3-70b", name="Llama 3.1 70B", params=70.6e9, layers=80, hidden=8192, heads=64,
        seq_len=8192,
        source="Llama Team, The Llama 3 Herd of Models (arXiv:2407.21783), table 3",
        url="https://arxiv.org/abs/2407.21783"),
    ModelPreset(
        key="llama3-405b", name="Llama 3.1 405B", params=405e9, layers=126, hidden=16384,
        heads=128, seq_len=8192,
        source="Llama Team, The Llama 3 Herd of Models (arXiv:2407.21783), table 3",
        url="https://arxiv.org/abs/2407.21783"),
    ModelPreset(
        key="gpt3-175b", name="GPT-3 175B", params=175e9, layers=96, hidden=12288, heads=96,
        seq_len=2048,
        source="Brown et al., Language Models are Few-Shot Learners (arXiv:2005.14165), table 2.1; "
               "the configuration Korthikanti et al. use",
        url="https://arxiv.org/abs/2005.14165"),
    ModelPreset(
        key="mixtral-8x7b", name="Mixtral 8x7B (MoE)", params=46.7e9, active_params=12.9e9,
        layers=32, hidden=4096, heads=32, seq_len=32768,
        source="Jiang et al., Mixtral of Experts (arXiv:2401.04088), table 1 and section 2.1: "
               "8 experts, 2 per token, 47B parameters of which 13B active",
        url="https://arxiv.org/abs/2401.04088",
        note="Memory counts all 46.7B parameters on each model shard (no expert parallelism); "
             "FLOPs count the 12.9B each token uses."),
)

GPUS: tuple[GpuPreset, ...] = (
    GpuPreset(
        key="a100", name="A100 SXM 80GB", memory_gb=80, peak_tflops=312, nvlink_gb_s=600,
        network_gbit_s=200,
        source="NVIDIA A100 Tensor Core GPU datasheet (BF16 312 TFLOPS dense, 624 with sparsity; "
               "80GB HBM2e; NVLink 600GB/s); DGX A100 datasheet (8 × ConnectX-6 200Gb/s HDR)",
        url="https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
            "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"),
    GpuPreset(
        key="h100", name="H100 SXM 80GB", memory_gb=80, peak_tflops=989, nvlink_gb_s=900,
        network_gbit_s=400,
        source="NVIDIA H100 Tensor Core GPU datasheet (BF16 1,979 TFLOPS with sparsity, so 989 "
               "dense; 80GB; NVLink 900GB/s); DGX H100 datasheet (8 × ConnectX-7 400Gb/s)",
        url="https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"),
    GpuPreset(
        key="b200", name="B200 (HGX/DGX B200)", memory_gb=180, peak_tflops=2250, nvlink_gb_s=1800,
        network_gbit_s=400,
        source="NVIDIA DGX B200 datasheet (1,440GB for 8 GPUs, so 180GB each; NVLink 5 at 1.8TB/s "
               "per GPU; 8 × ConnectX-7 400Gb/s); HGX B200 specifications (FP16/BF16 4.5 PFLOPS "
               "per GPU with sparsity, so 2,250 TFLOPS dense)",
        url="https://www.nvidia.com/en-us/data-center/dgx-b200/"),
)

# A GPU's failures: Llama 3's pre-training saw 419 unexpected interruptions in 54 days on
# 16,384 H100s (The Llama 3 Herd of Models, section 3.3.4, table 5): about one per
# 16,384 × 54 × 24 / 419 ≈ 50,700 GPU-hours.
MTBF_HOURS_PER_GPU = 50_000
MTBF_SOURCE = ("Llama Team, The Llama 3 Herd of Models (arXiv:2407.21783), section 3.3.4: 419 "
               "unexpected interruptions in 54 days on 16,384 GPUs, about 50,000 GPU-hours each")

MODEL_BY_KEY = {m.key: m for m in MODELS}
GPU_BY_KEY = {g.key: g for g in GPUS}
