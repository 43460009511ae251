# Four 512x512 linear layers (1 MiB of fp32 weight each) with bucket_cap_mb=1,
# so after the first iteration each layer's weight and bias form one bucket.
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Sequential(*[nn.Linear(512, 512) for _ in range(4)])
ddp = DDP(model, bucket_cap_mb=1)
x = torch.randn(64, 512)
for step in range(3):
    ddp(x).sum().backward()
    model.zero_grad()
logging = ddp._get_ddp_logging_data()
report("rebuilt_bucket_sizes", logging.get("rebuilt_bucket_sizes"))
report("rebuilt_per_bucket_param_indices", logging.get("rebuilt_per_bucket_param_indices"))
