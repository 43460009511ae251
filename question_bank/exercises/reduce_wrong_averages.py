import torch
import torch.distributed as dist

local_tokens = torch.randint(100, 1000, ())  # this shard's token count
dist.all_reduce(local_tokens)
total_tokens = int(local_tokens.item()) // dist.get_world_size()  # all_reduce left the sum of the ranks' counts
scale = 1.0 / total_tokens
