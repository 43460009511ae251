# Checks: a vocabulary of 12 split over the ranks, 5 tokens, once with ordinary logits and once
# with logits around 200 (exp overflows float32 above about 88), against F.cross_entropy on
# the full logits on one process. The engine counts the all-reduces.
import torch as _torch
import torch.nn.functional as _F

_V, _B = 12, 5
_part = _V // world_size
_start = rank * _part

for _name, _seed, _offset in (("loss", 1, 0.0), ("loss_large", 2, 200.0), ("loss_again", 3, 0.0)):
    _g = _torch.Generator().manual_seed(_seed)
    _full = 3 * _torch.randn(_B, _V, generator=_g) + _offset
    _target = _torch.randint(0, _V, (_B,), generator=_g)
    _got = vocab_parallel_cross_entropy(_full[:, _start:_start + _part].clone(), _target.clone(), _start)
    report(_name, _got)
    report(f"{_name}_ok", bool(_torch.allclose(_got, _F.cross_entropy(_full, _target, reduction="none"),
                                               atol=1e-5)))
