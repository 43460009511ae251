# A token counter that all-reduces once per step, next to DDP. Rank 0 has 3 batches, rank 1
# has 1. With `joinable` on, the counter is a Joinable whose join hook shadows its all_reduce
# for ranks that have run out; off, it is plain code inside ddp.join().
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.distributed.algorithms.join import Join, Joinable, JoinHook


class TokenCounter(Joinable):
    def __init__(self):
        super().__init__()
        self.total = torch.zeros(1)

    def add(self, tokens):
        Join.notify_join_context(self)           # lets Join know this rank is still active
        t = torch.tensor([float(tokens)])
        dist.all_reduce(t)
        self.total += t

    def join_hook(self, **kwargs):
        class Shadow(JoinHook):
            def main_hook(self):                 # a joined rank matches each all_reduce with zeros
                dist.all_reduce(torch.zeros(1))
        return Shadow()

    @property
    def join_device(self):
        return torch.device("cpu")

    @property
    def join_process_group(self):
        return dist.group.WORLD


model = nn.Linear(1, 1)
ddp = DDP(model)
counter = TokenCounter()
batches = 3 if rank == 0 else 1
context = Join([ddp, counter]) if params["joinable"] else ddp.join()
with context:
    for _ in range(batches):
        ddp(torch.ones(1, 1)).sum().backward()
        if params["joinable"]:
            counter.add(100)
        else:
            t = torch.tensor([100.0])
            dist.all_reduce(t)                     # the same counting, not known to Join
            counter.total += t
report("tokens_counted", counter.total.item())
