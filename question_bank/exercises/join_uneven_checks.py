# The trained weights and the steps each rank took, raw: the app compares the weights with what
# the reference solution trains on the same data (each rank's batches come from torch's
# generator, which the run seeds per rank with a seed no other rank knows).
import torch as _torch

report("steps", steps)
report("final_weights", _torch.cat([p.detach().flatten() for p in model.parameters()]))
