# The indices this rank saw in each epoch, raw: the app compares them with the reference
# solution's on the same rank and world size (each epoch a new permutation, split between the
# ranks without overlap, as DistributedSampler's set_epoch gives it).
report("epoch_orders", [list(seen.get(e, [])) for e in range(3)])
