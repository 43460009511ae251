import torch
import torch.distributed as dist

local_tokens = torch.tensor(100 * (rank + 1))  # this shard's token count
total_tokens = int(local_tokens.item())
dist.all_reduce(local_tokens)  # every rank needs the total
scale = 1.0 / total_tokens
