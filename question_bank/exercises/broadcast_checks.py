# Raw weights, compared in the app with the reference solution's run on the same rank:
# the replicas must start from rank 0's initial weights and train to the same values.
import torch as _torch

report("initial_weights", _torch.cat([t.detach().flatten() for t in initial]))
report("final_weights", _torch.cat([p.detach().flatten() for p in model.parameters()]))
