# Each rank starts an asynchronous distributed checkpoint of a model, and
# training "goes on" at once: the weights are overwritten in place while the
# save may still be writing. What ends up on disk?
import os

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn

torch.manual_seed(0)
model = nn.Linear(2048, 2048)  # a 16 MiB weight, so the write takes a while
initial = model.weight.detach().clone()
path = os.path.join(os.getcwd(), "ckpt")

future = dcp.async_save({"model": model.state_dict()}, checkpoint_id=path)
report("done_when_async_save_returned", future.done())
with torch.no_grad():
    model.weight.fill_(7.0)  # the next optimizer step, in spirit
future.result()  # wait for the background write before reading it back
dist.barrier()

restored = {"model": nn.Linear(2048, 2048).state_dict()}
dcp.load(restored, checkpoint_id=path)
report("restored_has_new_values", bool((restored["model"]["weight"] == 7.0).any()))
report("restored_equals_state_at_call", torch.equal(restored["model"]["weight"], initial))
dist.barrier()
