import torch
import torch.distributed as dist


def pipeline_forward(stage, x, n_micro):
    me, n = dist.get_rank(), dist.get_world_size()
    results = []
    # Every micro-batch of this stage first, then hand them all on.
    for chunk in x.chunk(n_micro):
        if me > 0:
            chunk = torch.empty_like(chunk)
            dist.recv(chunk, src=me - 1)
        results.append(stage(chunk))
    if me < n - 1:
        for y in results:
            dist.send(y.contiguous(), dst=me + 1)
        return None
    return torch.cat(results)
