# torch.distributed.checkpoint (DCP) with an FSDP2 model on two gloo ranks:
# what the state dicts hold, which files dcp.save writes, and whether a plain
# (unsharded) model can load the result. The run's scratch folder /tmp is
# shared by the ranks, like a shared file system.
import os

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict, get_state_dict
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 6), nn.Linear(6, 2))


model = make_model()
fully_shard(model[0])
fully_shard(model[1])
fully_shard(model)
opt = torch.optim.Adam(model.parameters(), lr=0.1)
model(torch.randn(3, 8)).sum().backward()
opt.step()

# Sharded state dicts (the default): every rank holds DTensors for its own shards.
model_sd, optim_sd = get_state_dict(model, opt)
report("model_sd_value_types", sorted({type(v).__name__ for v in model_sd.values()}))
report("model_sd_local_rows", model_sd["0.weight"].to_local().shape[0])
report("optim_sd_param_keys", sorted(optim_sd["state"].keys()))

dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id="/tmp/ckpt")
dist.barrier()
report("files", sorted(os.listdir("/tmp/ckpt")))

# A full state dict instead: gathered, on CPU, on rank 0 only.
full_sd = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
report("full_sd_keys", len(full_sd))
report("full_sd_value_types", sorted({type(v).__name__ for v in full_sd.values()}))
report("full_sd_weight_shape", list(full_sd["0.weight"].shape) if full_sd else None)

# A plain, unsharded model (think: an evaluation job) loads the sharded checkpoint directly.
expected = model[0].weight.full_tensor()
plain = make_model()
with torch.no_grad():
    for p in plain.parameters():
        p.zero_()
plain_sd = {"model": plain.state_dict()}
dcp.load(plain_sd, checkpoint_id="/tmp/ckpt")
report("plain_load_matches", bool(torch.equal(plain[0].weight, expected)))
report("plain_is_dtensor", isinstance(plain[0].weight, DTensor))
