import torch
import torch.distributed as dist


def _gather_sequence(t):
    """Every rank's stretch of the sequence, concatenated in rank order: (S, H, D)."""
    parts = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, t.contiguous())
    return torch.cat(parts)


def ulysses_attention(q, k, v):
    """Attention over the whole sequence for this rank's stretch of it.

    q, k, v: (S/N, H, D), rank r holding positions [r*S/N, (r+1)*S/N) of every head; H is
    a multiple of N. Returns (S/N, H, D): softmax(q k^T / sqrt(D)) v over all S positions
    (no mask), for the same positions as q.

    This version gathers the whole of Q, K and V on every rank, computes all of the
    attention and keeps its own stretch.
    """
    q, k, v = _gather_sequence(q), _gather_sequence(k), _gather_sequence(v)
    scores = torch.einsum("shd,thd->hst", q, k) / q.shape[-1] ** 0.5
    out = torch.einsum("hst,thd->shd", scores.softmax(dim=-1), v)
    return out.chunk(dist.get_world_size())[dist.get_rank()]
