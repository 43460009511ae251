import torch
import torch.distributed as dist


def _seq_to_heads(t):
    """(S/N, H, D) with every head -> (S, H/N, D) with the whole sequence: one all-to-all."""
    n = dist.get_world_size()
    s_local, h, d = t.shape
    # Block j of the send buffer holds the heads rank j will own: [j*H/N, (j+1)*H/N).
    send = t.reshape(s_local, n, h // n, d).transpose(0, 1).contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)
    # Block i of the receive buffer is rank i's stretch of the sequence, in order.
    return recv.reshape(n * s_local, h // n, d)


def _heads_to_seq(t):
    """(S, H/N, D) -> (S/N, H, D): the inverse all-to-all."""
    n = dist.get_world_size()
    s, h_local, d = t.shape
    send = t.reshape(n, s // n, h_local, d).contiguous()  # block j: rank j's stretch
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)
    # Block i now holds heads [i*H/N, (i+1)*H/N) of this rank's stretch.
    return recv.reshape(s // n, n * h_local, d)


def ulysses_attention(q, k, v):
    """Attention over the whole sequence for this rank's stretch of it (DeepSpeed-Ulysses).

    q, k, v: (S/N, H, D), rank r holding positions [r*S/N, (r+1)*S/N) of every head; H is
    a multiple of N. Returns (S/N, H, D): softmax(q k^T / sqrt(D)) v over all S positions
    (no mask), for the same positions as q.
    """
    q, k, v = _seq_to_heads(q), _seq_to_heads(k), _seq_to_heads(v)
    scores = torch.einsum("shd,thd->hst", q, k) / q.shape[-1] ** 0.5
    out = torch.einsum("hst,thd->shd", scores.softmax(dim=-1), v)
    return _heads_to_seq(out)
