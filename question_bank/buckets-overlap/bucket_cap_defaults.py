# Eight nn.Linear(512, 512) layers (1,050,624 bytes of fp32 parameters each),
# DDP at its default bucket settings, three iterations (buckets are rebuilt at the second).
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Sequential(*[nn.Linear(512, 512) for _ in range(8)])
ddp = DDP(model)
for _ in range(3):
    ddp(torch.randn(2, 512)).sum().backward()
    model.zero_grad()
report("default_cap_mib", ddp.bucket_bytes_cap / 2**20)
report("rebuilt_bucket_sizes", str(ddp._get_ddp_logging_data()["rebuilt_bucket_sizes"]))
