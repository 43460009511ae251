import torch as _torch
import torch.distributed as _dist

report("steps", steps)
_w = _torch.cat([p.detach().flatten() for p in model.parameters()])
_all = [_torch.zeros_like(_w) for _ in range(world_size)]
_dist.all_gather(_all, _w)
report("weights_match", all(_torch.equal(_all[0], t) for t in _all))
