# Checks: a vocabulary of 4,096 split over the ranks, 8 tokens (large enough that B x V floats
# outweigh the all-reduces' own framing on the wire); each rank's columns of the logits
# drawn from its own secret seed (no rank knows another's), the targets shared. Once with
# ordinary logits, once with logits around 200 (exp overflows float32 above about 88), once
# more. The losses are compared, in the app, with the reference solution's on the same data;
# the driver counts the all-reduces.
import torch as _torch

_V, _B = 4096, 8
_part = _V // world_size
_start = rank * _part
_own = _torch.Generator().manual_seed(rank_seed)
_shared = _torch.Generator().manual_seed(shared_seed)

for _name, _offset in (("loss", 0.0), ("loss_large", 200.0), ("loss_again", 0.0)):
    _local = 3 * _torch.randn(_B, _part, generator=_own) + _offset
    _target = _torch.randint(0, _V, (_B,), generator=_shared)
    report(_name, vocab_parallel_cross_entropy(_local, _target.clone(), _start))
