# Checks: the result of two calls (1,200 and 1,200,000 elements, divisible by 2, 3 and 4; each
# rank's tensors from its own secret seed), compared in the app with the reference ring's on
# the same data. The driver counts the point-to-point calls and the bytes each rank puts on the
# wire, which the app compares with the reference ring's: 2(N - 1)/N of the tensor per call.
import torch as _torch

_own = _torch.Generator().manual_seed(rank_seed)
_small = _torch.randn(1200, generator=_own)
ring_all_reduce(_small)
report("reduced", _small)

_big = _torch.randn(1_200_000, generator=_own)  # float32, 4.8 MB
ring_all_reduce(_big)
report("reduced_big_head", _big[:256])
report("reduced_big_sum", _big.double().sum())
