# params["layers"] 256x256 linear layers (four by default): each weight is
# 256 KiB of fp32 (262,144 bytes), plus a 1 KiB bias. Three training iterations.
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Sequential(*[nn.Linear(256, 256) for _ in range(params.get("layers", 4))])
ddp = DDP(model, bucket_cap_mb=params["bucket_cap_mb"])
x = torch.randn(8, 256)
for step in range(3):
    ddp(x).sum().backward()
    model.zero_grad()
logging = ddp._get_ddp_logging_data()
report("cap_bytes", ddp.bucket_bytes_cap)
report("initial_bucket_sizes", logging.get("bucket_sizes"))
report("rebuilt_bucket_sizes", logging.get("rebuilt_bucket_sizes"))
report("rebuilt_bucket_count", len(str(logging.get("rebuilt_bucket_sizes")).split(",")))
