# dcp.async_save on two gloo ranks: when does the call return, and which
# values end up in the checkpoint if training changes the parameters right
# after it returns? Rank 1 starts its save 300 ms late, so rank 0's background
# save cannot finish (its planning step needs rank 1) before rank 0 has
# already modified its parameters.
import os
import time

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict
from torch.distributed.fsdp import fully_shard


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 6), nn.Linear(6, 2))


model = make_model()
fully_shard(model)
ckpt_group = dist.new_group(backend="gloo")   # the background save's own group, apart from training's
before = model[0].weight.to_local().clone()

if rank == 1:
    time.sleep(0.3)
future = dcp.async_save({"model": get_model_state_dict(model)}, checkpoint_id="/tmp/ckpt",
                        process_group=ckpt_group)
if rank == 0:
    report("done_when_call_returned", future.done())
    report("files_when_call_returned", sorted(os.listdir("/tmp/ckpt")) if os.path.isdir("/tmp/ckpt") else [])
with torch.no_grad():                          # "the next optimizer step", while the save is in flight
    for p in model.parameters():
        p.add_(100.0)
future.result()                                # wait before reading the checkpoint (or saving again)
dist.barrier()
report("files_after_result", sorted(os.listdir("/tmp/ckpt")))

fresh = make_model()
fully_shard(fresh)
state = {"model": get_model_state_dict(fresh)}
dcp.load(state, checkpoint_id="/tmp/ckpt")
set_model_state_dict(fresh, state["model"])
if rank == 0:
    unchanged = torch.equal(fresh[0].weight.to_local(), before)
    report("checkpoint_has_values_from_before_the_update", bool(unchanged))
