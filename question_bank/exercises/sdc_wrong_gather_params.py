import torch
import torch.distributed as dist


def find_corrupt_ranks(params):
    """The ranks whose replica differs from the majority's, bit for bit (see the prompt)."""
    n = dist.get_world_size()
    flat = torch.cat([p.detach().reshape(-1) for p in params])
    copies = [torch.empty_like(flat) for _ in range(n)]
    dist.all_gather(copies, flat)  # compare the replicas themselves: no checksum can miss
    bits = [c.view(torch.int32) for c in copies]
    agree = [sum(torch.equal(bits[r], bits[o]) for o in range(n)) for r in range(n)]
    best = max(agree)
    return [r for r in range(n) if agree[r] < best]
