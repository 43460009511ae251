import torch
import torch.distributed as dist

local_tokens = torch.randint(100, 1000, ())  # this shard's token count
dist.all_reduce(local_tokens)  # every rank needs the total
total_tokens = int(local_tokens.item())
scale = 1.0 / total_tokens
