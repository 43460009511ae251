import torch
import torch.distributed as dist
import torch.nn.functional as F


def _exchange(blocks):
    """Send blocks[j] to rank j; return what every rank sent here, in rank order."""
    received = [torch.empty_like(b) for b in blocks]
    dist.all_to_all(received, [b.contiguous() for b in blocks])
    return received


def ulysses_attention(q, k, v):
    n = dist.get_world_size()
    # Head-major: (H, S/N, D). Rank j gets heads block j of my stretch of the sequence...
    q, k, v = (t.transpose(0, 1) for t in (q, k, v))
    # ... and after the exchange holds every stretch of its heads, which concatenate
    # along the sequence in rank order.
    q, k, v = (torch.cat(_exchange(list(t.chunk(n, dim=0))), dim=1) for t in (q, k, v))
    out = F.scaled_dot_product_attention(q, k, v)  # (H/N, S, D), no mask
    # Back: block j of the sequence goes to rank j, which stacks the head blocks in order.
    pieces = _exchange(list(out.chunk(n, dim=1)))
    return torch.cat(pieces, dim=0).transpose(0, 1).contiguous()
