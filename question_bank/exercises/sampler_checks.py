import torch as _torch
import torch.distributed as _dist

_orders = [tuple(seen.get(e, [])) for e in range(3)]
report("epoch_orders_distinct", len(set(_orders)) == 3 and all(_orders))
_per_rank = -(-16 // world_size)  # DistributedSampler pads every rank to this many
_covers = True
for _e in range(3):
    _mine = list(seen.get(_e, []))[:_per_rank]
    _t = _torch.tensor(_mine + [-1] * (_per_rank - len(_mine)))
    _parts = [_torch.empty_like(_t) for _ in range(world_size)]
    _dist.all_gather(_parts, _t)
    _union = [i for p in _parts for i in p.tolist() if i >= 0]
    _covers = _covers and len(seen.get(_e, [])) == _per_rank and set(_union) == set(range(16))
report("epoch_covers_dataset", _covers)
