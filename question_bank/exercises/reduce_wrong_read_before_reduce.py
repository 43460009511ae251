import torch
import torch.distributed as dist

local_tokens = torch.randint(100, 1000, ())  # this shard's token count
total_tokens = int(local_tokens.item())
dist.all_reduce(local_tokens)  # every rank needs the total
scale = 1.0 / total_tokens
