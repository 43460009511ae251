# Checks: shard_indices for several dataset sizes against DistributedSampler itself, and, by
# calling it for every rank, whether the shards have equal lengths and cover the dataset.
# DistributedSampler is disabled while your function runs: the point is to write it.
import torch.utils.data.distributed as _tud

_CASES = {  # name: (n, shuffle, seed, epoch)
    "n11": (11, False, 0, 0),
    "n10_shuffled": (10, True, 3, 1),
    "n1": (1, False, 0, 0),
    "n7_shuffled": (7, True, 0, 5),
}


def _sampler(n, r, shuffle, seed, epoch):
    s = _tud.DistributedSampler(range(n), num_replicas=world_size, rank=r, shuffle=shuffle,
                                seed=seed, drop_last=False)
    s.set_epoch(epoch)
    return list(s)


_expected = {k: [_sampler(n, r, sh, sd, ep) for r in range(world_size)]
             for k, (n, sh, sd, ep) in _CASES.items()}


def _refuse(self):
    raise RuntimeError("DistributedSampler is what the checks compare against: write the index arithmetic yourself")


_tud.DistributedSampler.__iter__ = _refuse
for _name, (_n, _sh, _sd, _ep) in _CASES.items():
    _shards = [list(shard_indices(_n, _r, world_size, shuffle=_sh, seed=_sd, epoch=_ep))
               for _r in range(world_size)]
    report(f"indices_{_name}", _shards[rank])
    report(f"indices_{_name}_ok", _shards == _expected[_name])
    _seen = {i for s in _shards for i in s}
    report(f"covers_{_name}", _seen == set(range(_n)) and len({len(s) for s in _shards}) == 1)
