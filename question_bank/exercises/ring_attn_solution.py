import math

import torch
import torch.distributed as dist


def ring_attention(q, k, v):
    """Causal self-attention over a sequence split into world_size contiguous chunks.

    Rank r holds positions [r*c, (r+1)*c) of the sequence: `q`, `k` and `v` are its (c, d)
    chunks. Returns (c, d): for this rank's queries, softmax(q Kᵀ / √d) V over the keys of
    the whole sequence at positions up to the query's own.
    """
    n, me = dist.get_world_size(), dist.get_rank()
    c, d = q.shape
    scale = 1.0 / math.sqrt(d)
    # Running softmax state per query row: max, normaliser, unnormalised output.
    m = torch.full((c,), float("-inf"))
    l = torch.zeros(c)
    acc = torch.zeros(c, d)
    kv = torch.cat([k, v], dim=1).contiguous()  # one message per step carries both
    for step in range(n):
        if step < n - 1:  # pass the block on while computing with it
            nxt = torch.empty_like(kv)
            reqs = [dist.isend(kv, dst=(me + 1) % n), dist.irecv(nxt, src=(me - 1) % n)]
        j = (me - step) % n  # blocks move right, so this one started on rank me - step
        if j <= me:  # later blocks are in this rank's future: causally masked out
            s = (q @ kv[:, :d].t()) * scale
            if j == me:
                s = s.masked_fill(torch.ones(c, c, dtype=torch.bool).triu(1), float("-inf"))
            m_new = torch.maximum(m, s.max(dim=1).values)
            p = torch.exp(s - m_new[:, None])
            fix = torch.exp(m - m_new)  # rescale what was accumulated under the old max
            l = l * fix + p.sum(dim=1)
            acc = acc * fix[:, None] + p @ kv[:, d:]
            m = m_new
        if step < n - 1:
            for req in reqs:
                req.wait()
            kv = nxt
    return acc / l[:, None]
