import math

import torch
import torch.distributed as dist


def ring_attention(q, k, v):
    """Causal self-attention over a sequence split into world_size contiguous chunks."""
    n, me = dist.get_world_size(), dist.get_rank()
    c, d = q.shape
    q = q / math.sqrt(d)
    m = torch.full((c, 1), float("-inf"))
    l = torch.zeros(c, 1)
    acc = torch.zeros(c, d)
    for step in range(n):
        j = (me - step) % n  # the rank this K/V block started on
        if j <= me:
            s = q @ k.t()
            if j == me:
                s = s.masked_fill(torch.ones(c, c, dtype=torch.bool).triu(1), float("-inf"))
            m_new = torch.maximum(m, s.amax(dim=1, keepdim=True))
            p = (s - m_new).exp()
            fix = (m - m_new).exp()
            l = l * fix + p.sum(dim=1, keepdim=True)
            acc = acc * fix + p @ v
            m = m_new
        if step < n - 1:  # K and V move one rank to the right, as two messages
            k_next, v_next = torch.empty_like(k), torch.empty_like(v)
            reqs = dist.batch_isend_irecv([
                dist.P2POp(dist.isend, k.contiguous(), (me + 1) % n),
                dist.P2POp(dist.isend, v.contiguous(), (me + 1) % n),
                dist.P2POp(dist.irecv, k_next, (me - 1) % n),
                dist.P2POp(dist.irecv, v_next, (me - 1) % n)])
            for req in reqs:
                req.wait()
            k, v = k_next, v_next
    return acc / l
