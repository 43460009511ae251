import torch
import torch.distributed as dist


def pipeline_forward(stage, x, n_micro):
    """Run the model as a pipeline: rank r holds `stage`, the r-th of world_size stages.

    On rank 0, `x` is the input batch; on the other ranks it is a tensor of the same shape
    full of NaN (only the shape is yours to use). Every stage maps (rows, width) to
    (rows, width). The last rank returns the whole output in batch order; the others
    return None.
    """
    me, n = dist.get_rank(), dist.get_world_size()
    outputs = []
    for chunk in x.chunk(n_micro):
        if me > 0:
            chunk = torch.empty_like(chunk)
            dist.recv(chunk, src=me - 1)
        y = stage(chunk)
        if me < n - 1:
            # Hand this micro-batch on before starting the next: the next stage works on it
            # while this one computes the following micro-batch.
            dist.send(y.contiguous(), dst=me + 1)
        else:
            outputs.append(y)
    return torch.cat(outputs) if me == n - 1 else None
