# A lone BatchNorm1d(1) under DDP. Rank 0's batch is [0, 1, 2, 3] (mean 1.5),
# rank 1's is the same shifted by rank1_offset (by default [10, 11, 12, 13],
# mean 11.5); momentum 0.1; `steps` training steps (3 by default).
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
bn = nn.BatchNorm1d(1)
# forward_sync_buffers is torch 2.13's name for the old broadcast_buffers flag.
ddp = DDP(bn, forward_sync_buffers=params.get("forward_sync_buffers", True))
batch = (torch.arange(4.0) + float(params.get("rank1_offset", 10)) * rank).unsqueeze(1)
before, after = [], []
for step in range(params.get("steps", 3)):
    before.append(round(bn.running_mean.item(), 4))  # this rank's value entering forward
    ddp(batch).sum().backward()
    after.append(round(bn.running_mean.item(), 4))
report("running_mean_before_forward", before)
report("running_mean_after_forward", after)
report("final_running_mean", after[-1])

means = [torch.zeros(1) for _ in range(world_size)]
dist.all_gather(means, bn.running_mean.clone())
report("running_means_agree", all(torch.equal(means[0], m) for m in means))
bn.eval()
with torch.no_grad():
    report("eval_output_for_2", round(bn(torch.tensor([[2.0]])).item(), 4))
