# How does fully_shard split a tensor whose first dimension does not divide
# by the number of ranks? nn.Linear(5, 3): weight (3, 5), bias (3,).
import torch
from torch import nn
from torch.distributed.fsdp import fully_shard

torch.manual_seed(0)
layer = nn.Linear(5, 3)
full_weight = layer.weight.detach().clone()
fully_shard(layer)

w = layer.weight                                   # a DTensor: global metadata + this rank's piece
report("global_shape", list(w.shape))
report("placements", str(w.placements))
report("local_weight_shape", list(w.to_local().shape))
report("local_bias_shape", list(layer.bias.to_local().shape))
# Gathering the pieces gives back the original weight: nothing was lost or duplicated.
report("full_tensor_matches", bool(torch.equal(w.full_tensor(), full_weight)))
