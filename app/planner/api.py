"""POST /api/v1/plan: a layout in, its memory, FLOPs, time, bubble, traffic and checkpoint
interval out. A stable contract (docs/planner.md): fields are added, never renamed."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.exceptions import RequestValidationError

from app.deps import API_BUSY, API_ERROR
from app.planner import service
from app.planner.schemas import PlanIn, PlanOut

router = APIRouter(prefix="/api/v1", tags=["planner"], responses=API_BUSY)

CONTRACT = """**A stable contract**: scripts may rely on every field below; new fields are only
ever added. Bytes are per GPU, times in seconds (and days), FLOPs and counts as numbers.

Conventions: bf16 parameters and gradients (2 bytes each), fp32 master weights and two Adam
moments (12): 16 bytes per parameter; each GPU holds params / (tp · pp) of the model (the
embedding's imbalance is ignored); ZeRO-1 divides the optimizer bytes by dp, ZeRO-2 also the
gradients, ZeRO-3 also the parameters. Activations per layer and micro-batch follow
Korthikanti et al. (2022) for the recompute mode and sequence parallelism, × layers / pp ×
the micro-batches in flight on the first stage (min(pp, m) under 1F1B, 1 without a
pipeline). FLOPs are 6 · params · tokens (attention's own FLOPs left out). The bubble is
(pp − 1) / (interleave · m + pp − 1) with m = global_batch / (dp · micro_batch). Data-parallel
bytes are a ring all-reduce of the bf16 gradients, 2 · (dp − 1)/dp · 2 · params/(tp · pp),
or 3 · ... under ZeRO-3. The checkpoint interval is Young/Daly's √(2 · C · MTBF) with the
job's MTBF = mtbf_hours · 3600 / gpus.

A layout that does not divide gets **422** with `detail` listing each problem and the field
it names (`loc`, e.g. `["body", "layout", "tp"]`): dp · tp · pp ≠ gpus (`layout.dp`), heads
not divisible by tp (`model.heads`), layers not divisible by pp (`model.layers`),
global_batch not divisible by dp · micro_batch (`layout.global_batch`)."""


@router.post("/plan", response_model=PlanOut, summary="Evaluate a training layout",
          description=CONTRACT,
          responses={422: {"description": "A field is missing or out of range, or the layout "
                                          "does not divide; `detail[].loc` names the field.",
                           **API_ERROR}})
def plan(body: PlanIn) -> PlanOut:
    try:
        return service.plan(request=body)
    except service.LayoutProblems as exc:
        # FastAPI's own validation error, so a layout's problems read like a field's.
        raise RequestValidationError([
            {"loc": ("body", *p.loc), "msg": p.message, "type": "value_error"}
            for p in exc.problems]) from None
