"""torch.distributed.checkpoint through the engine: saved by two ranks, loaded resharded by four.

A run's scratch folder is its own (the sandbox mounts a fresh tmpfs per run, and
without the sandbox it is a temporary folder removed after the run), so two runs
cannot share a checkpoint folder. The change of world size happens inside one
4-rank run instead: ranks 0 and 1 save a tensor sharded over a 2-rank device mesh
of their own, then all four load it sharded four ways, which makes DCP reshard
from the saved layout to the new one.
"""

from __future__ import annotations

from tests.verify.helpers import Run, events

SAVE_ON_TWO_LOAD_ON_FOUR = """
import os, torch, torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.tensor import Shard, distribute_tensor
full = torch.arange(32, dtype=torch.float32).reshape(8, 4)
two = DeviceMesh("cpu", [0, 1])
if rank < 2:
    dcp.save({"w": distribute_tensor(full, two, [Shard(0)])}, checkpoint_id="ckpt",
             process_group=two.get_group())
dist.barrier()
report("files", sorted(os.listdir("ckpt")))
four = init_device_mesh("cpu", (world_size,))
state = {"w": distribute_tensor(torch.zeros(8, 4), four, [Shard(0)])}
dcp.load(state, checkpoint_id="ckpt")
report("rows", state["w"].to_local())
"""


def test_a_checkpoint_saved_by_two_ranks_loads_resharded_on_four_within_one_run(run: Run) -> None:
    result = run(SAVE_ON_TWO_LOAD_ON_FOUR, world_size=4, timeout_s=90)
    assert result.outcome == "ok", result.diagnosis
    full = [[float(4 * row + col) for col in range(4)] for row in range(8)]
    for rank in range(4):
        values = result.ranks[rank].values
        # One data file per saving rank, seen by every rank of the run.
        assert values["files"] == [".metadata", "__0_0.distcp", "__1_0.distcp"]
        assert values["rows"] == full[2 * rank: 2 * rank + 2]
        starts = events(result, rank, "collective_start")
        saving = [e for e in starts if e.get("group_ranks") == [0, 1]]
        # The savers plan and commit over their own group; every rank plans the load on the world.
        assert (len(saving) > 0) == (rank < 2)
        assert any(e["op"] == "all_gather_object" and "group_ranks" not in e for e in starts)
    # And the folder went with the run: the next one cannot load it.
    after = run("""
    import os
    report("seen", os.path.exists("ckpt"))
    """, world_size=1)
    assert after.outcome == "ok" and after.ranks[0].values == {"seen": False}
