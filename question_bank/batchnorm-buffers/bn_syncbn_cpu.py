# SyncBatchNorm on CPU tensors with a gloo group: converting works; does it run?
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

model = nn.Sequential(nn.Linear(1, 1), nn.BatchNorm1d(1))
model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
report("converted_type", type(model[1]).__name__)
batch = (torch.arange(4.0) + 10.0 * rank).unsqueeze(1)
if params["wrap"] == "ddp":
    ddp = DDP(model)  # the usual recipe: convert, then wrap
    report("wrapped", True)
    ddp(batch).sum().backward()
else:
    model(batch)  # training-mode forward without DDP
report("forward_ran", True)
