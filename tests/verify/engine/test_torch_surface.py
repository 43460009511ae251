"""Everything the probes patch or read in torch, private names included, exists on the pinned torch.

Each probe module lists its torch names in TORCH_ATTRIBUTES (dotted, from the
module they live in); DDP and Join attributes that only exist on instances are
checked on real ones. A torch upgrade that renames or moves one fails here, in one
place, instead of silently losing a probe. Checked inside a real rank, where the
probes are installed, so what is resolved is what the probes see.
"""

from __future__ import annotations

from importlib import metadata

from tests.verify.helpers import Run

PINNED_TORCH = "2.13.0"

SURFACE = """
import importlib
import torch, torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

def resolve(dotted):
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for part in parts[i:]:
            obj = getattr(obj, part)
        return obj
    raise ImportError(dotted)

from app.verify.engine.probes import PROBE_MODULES
checked, missing = 0, []
for module in PROBE_MODULES:
    for name in module.TORCH_ATTRIBUTES:
        checked += 1
        try:
            resolve(name)
        except (ImportError, AttributeError) as exc:
            missing.append(f"{module.__name__}: {name} ({type(exc).__name__})")

from app.verify.engine.probes import ddp as ddp_probes
model = DDP(nn.Linear(2, 2))
join = model.join()
for owner, names in ((model, ddp_probes.DDP_INSTANCE_ATTRIBUTES + ddp_probes.DDP_JOIN_ATTRIBUTES),
                     (join, ddp_probes.JOIN_INSTANCE_ATTRIBUTES)):
    for name in names:
        checked += 1
        if not hasattr(owner, name):
            missing.append(f"{type(owner).__name__} instance: {name}")
from torch.distributed.pipelining import PipelineStage
from app.verify.engine.probes import pipeline as pipeline_probes
stage = PipelineStage(nn.Linear(2, 2), 0, 1, torch.device("cpu"))
for name in pipeline_probes.STAGE_INSTANCE_ATTRIBUTES:
    checked += 1
    if not hasattr(stage, name):
        missing.append(f"PipelineStage instance: {name}")
report("modules", [m.__name__.rsplit(".", 1)[-1] for m in PROBE_MODULES])
report("checked", checked)
report("missing", missing)
"""


def test_every_torch_name_the_probes_use_exists_on_the_pinned_torch(run: Run) -> None:
    assert metadata.version("torch").split("+")[0] == PINNED_TORCH
    result = run(SURFACE, world_size=1)
    assert result.outcome == "ok", result.diagnosis + result.ranks[0].stderr
    values = result.ranks[0].values
    assert values["missing"] == []
    assert set(values["modules"]) == {"collectives", "c10d", "ddp", "pipeline"} and values["checked"] > 100
