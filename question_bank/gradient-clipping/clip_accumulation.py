# Two micro-batches per step; the first runs inside no_sync. Either clip after
# every micro-batch's backward (the bug) or once after the synchronised one.
# Local gradients equal the inputs (sum loss, bias-free layer).
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def agree(value):
    copies = [torch.zeros_like(value) for _ in range(world_size)]
    dist.all_gather(copies, value)
    return all(torch.allclose(copies[0], c) for c in copies)


def run(clip_each_micro_batch):
    torch.manual_seed(0)
    model = nn.Linear(3, 1, bias=False)
    ddp = DDP(model)
    first = [[6.0, 0.0, 0.0]] if rank == 0 else [[0.0, 3.0, 0.0]]
    micro = [torch.tensor(first), torch.tensor([[0.0, 0.0, 1.0]])]
    norms = []
    with ddp.no_sync():
        ddp(micro[0]).sum().backward()
    if clip_each_micro_batch:
        norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0).item())
    ddp(micro[1]).sum().backward()  # all-reduces the accumulated .grad
    norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0).item())
    return norms, model.weight.grad.clone()


norms, grad = run(params["clip_each_micro_batch"])
_, reference = run(False)  # clip once, after the synchronised backward
report("norms", [round(n, 3) for n in norms])
report("final_grad", grad.flatten().round(decimals=4))
report("replicas_agree", agree(grad))
report("equals_clip_once", torch.allclose(grad, reference))
