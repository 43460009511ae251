import torch
import torch.distributed as dist


def _checksum(params):
    """The sum of every parameter in float64, so that small differences are not rounded away."""
    total = torch.zeros((), dtype=torch.float64)
    for p in params:
        total += p.detach().double().sum()
    return total.reshape(1)


def find_corrupt_ranks(params):
    """The ranks whose replica differs from the majority's, bit for bit; the same sorted
    list on every rank ([] when all replicas agree).

    `params` is a list of float32 tensors that should be identical on every rank.
    """
    mine = _checksum(params)
    every = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(every, mine)  # one number per rank crosses the wire, not the parameters
    values = [c.item() for c in every]
    middle = sorted(values)[len(values) // 2]
    # Floats are compared with a tolerance, never exactly.
    return [r for r, v in enumerate(values) if abs(v - middle) > 1e-6 * max(1.0, abs(middle))]
