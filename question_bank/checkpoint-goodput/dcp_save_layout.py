# Two ranks hold the same, replicated state dict (as every DDP rank does) and
# save it with torch.distributed.checkpoint. Which files appear, and how big?
import os

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn

torch.manual_seed(0)
model = nn.Linear(1024, 1024)  # weight 4 MiB, bias 4 KiB, identical on every rank
state_bytes = sum(t.numel() * t.element_size() for t in model.state_dict().values())
path = os.path.join(os.getcwd(), "ckpt")
dcp.save({"model": model.state_dict()}, checkpoint_id=path)
dist.barrier()

sizes = {name: os.path.getsize(os.path.join(path, name)) for name in sorted(os.listdir(path))}
data_files = [n for n in sizes if n.endswith(".distcp")]
report("files", sorted(sizes))
report("data_files", len(data_files))
report("has_metadata", ".metadata" in sizes)
total = sum(sizes[n] for n in data_files)
report("data_bytes_over_one_copy", round(total / state_bytes, 2))
report("largest_file_share", round(max(sizes[n] for n in data_files) / total, 2))
dist.barrier()
