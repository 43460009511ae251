from dataclasses import dataclass

import torch
import torch.distributed as dist

_MOD = 65_521  # positions are weighted 1..65521, so a value moved elsewhere changes the sum too


@dataclass
class Fingerprint:
    plain: int
    weighted: int

    def as_tensor(self):
        return torch.tensor([self.plain, self.weighted], dtype=torch.int64)


def _fingerprint(params):
    plain = weighted = 0
    offset = 0
    for p in params:
        bits = p.detach().reshape(-1).view(torch.int32).to(torch.int64)
        pos = (torch.arange(offset, offset + bits.numel(), dtype=torch.int64) % _MOD) + 1
        plain += int(bits.sum())
        weighted += int((bits * pos).sum())
        offset += bits.numel()
    return Fingerprint(plain, weighted)


def find_corrupt_ranks(params):
    n = dist.get_world_size()
    mine = _fingerprint(params).as_tensor()
    table = torch.empty(n * mine.numel(), dtype=torch.int64)
    dist.all_gather_into_tensor(table, mine)
    rows = [tuple(r.tolist()) for r in table.reshape(n, -1)]
    # The fingerprint held by most ranks is the healthy one.
    healthy = max(set(rows), key=rows.count)
    return sorted(r for r, row in enumerate(rows) if row != healthy)
