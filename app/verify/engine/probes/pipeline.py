"""The pipeline probe: each stage's forward and backward of each micro-batch, as events.

`torch.distributed.pipelining`'s schedules (GPipe, 1F1B, interleaved, zero
bubble) all run a stage's work through three methods of the stage:
`forward_one_chunk`, `backward_one_chunk` (the whole backward, or only the input
gradients when the schedule splits it) and `backward_weight_one_chunk`. Wrapping
those gives one block per stage, micro-batch and pass; the gaps between a rank's
blocks are its pipeline bubble. The schedules' send and receive of activations
are ordinary collectives (batch_isend_irecv) and are recorded as such.
"""

from __future__ import annotations

import functools
from typing import Any

from torch.distributed.pipelining import stage as pipeline_stage

from app.verify.engine.probes.core import Recorder, error_text, now, signature_of

_Stage = pipeline_stage._PipelineStageBase
TORCH_ATTRIBUTES = (
    "torch.distributed.pipelining.stage._PipelineStageBase.forward_one_chunk",
    "torch.distributed.pipelining.stage._PipelineStageBase.backward_one_chunk",
    "torch.distributed.pipelining.stage._PipelineStageBase.backward_weight_one_chunk",
    "torch.distributed.pipelining.PipelineStage",
    "torch.distributed.pipelining.ScheduleGPipe",
    "torch.distributed.pipelining.Schedule1F1B",
)
# Read on the stage instances (checked on a real one by tests/verify/engine/test_torch_surface.py).
STAGE_INSTANCE_ATTRIBUTES = ("stage_index", "has_backward")


def precompute() -> None:
    """The signature `install` needs, in this process (the forkserver, before forking)."""
    signature_of(_Stage.backward_one_chunk)


def install(rec: Recorder) -> None:
    """Wrap the stage's three per-micro-batch methods (once per rank)."""
    forward = _Stage.forward_one_chunk
    backward = _Stage.backward_one_chunk
    weight = _Stage.backward_weight_one_chunk
    backward_sig = signature_of(backward)
    assert backward_sig is not None

    @functools.wraps(forward)
    def forward_one_chunk(self: Any, fwd_chunk_id: int, *args: Any, **kwargs: Any) -> Any:
        return _block(rec, "forward", None, forward, self, fwd_chunk_id, args, kwargs)

    @functools.wraps(backward)
    def backward_one_chunk(self: Any, bwd_chunk_id: int, *args: Any, **kwargs: Any) -> Any:
        if not self.has_backward:  # the stage skips it
            return backward(self, bwd_chunk_id, *args, **kwargs)
        try:
            full = backward_sig.bind(self, bwd_chunk_id, *args, **kwargs).arguments.get("full_backward", True)
        except TypeError:
            full = True
        part = "full" if full else "input"
        return _block(rec, "backward", part, backward, self, bwd_chunk_id, args, kwargs)

    @functools.wraps(weight)
    def backward_weight_one_chunk(self: Any, bwd_chunk_id: int, *args: Any, **kwargs: Any) -> Any:
        if not self.has_backward:
            return weight(self, bwd_chunk_id, *args, **kwargs)
        return _block(rec, "backward", "weight", weight, self, bwd_chunk_id, args, kwargs)

    _Stage.forward_one_chunk = forward_one_chunk  # type: ignore[method-assign]
    _Stage.backward_one_chunk = backward_one_chunk  # type: ignore[method-assign]
    _Stage.backward_weight_one_chunk = backward_weight_one_chunk  # type: ignore[method-assign]


def _block(rec: Recorder, which: str, part: str | None, call: Any, stage: Any, microbatch: Any,
           args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run `call(stage, microbatch, *args, **kwargs)`, one stage block, between its start and end events."""
    seq = rec.next_seq()
    fields: dict[str, Any] = {"seq": seq, "stage": int(stage.stage_index), "microbatch": int(microbatch)}
    start = {**fields, "part": part} if part is not None else fields
    rec.emit(f"stage_{which}_start", t=now(), iteration=rec.iteration, **start)
    try:
        out = call(stage, microbatch, *args, **kwargs)
    except BaseException as exc:
        rec.emit(f"stage_{which}_end", **fields, error=error_text(exc))
        raise
    rec.emit(f"stage_{which}_end", **fields)
    return out
