# Causal ring attention over a 64-token sequence on world_size ranks, with two ways of
# placing the tokens:
#   contiguous: rank r holds tokens [r*S/N, (r+1)*S/N);
#   zigzag:     the sequence is cut into 2N chunks and rank r holds chunks r and 2N-1-r.
# Each rank keeps its queries and passes its K/V around the ring; a key is used by a query
# only if it is not later in the sequence. We count the (query, key) pairs each rank
# actually scores, and check the result against unsplit causal attention.
import torch
import torch.distributed as dist

S, D = 64, 8
N = world_size
torch.manual_seed(0)
q_all, k_all, v_all = torch.randn(3, S, D).unbind(0)
causal = torch.ones(S, S, dtype=torch.bool).tril()
full = torch.softmax((q_all @ k_all.T / D ** 0.5).masked_fill(~causal, float("-inf")), -1) @ v_all

if params["layout"] == "contiguous":
    pos = torch.arange(rank * S // N, (rank + 1) * S // N)
else:
    c = S // (2 * N)
    pos = torch.cat([torch.arange(rank * c, (rank + 1) * c),
                     torch.arange((2 * N - 1 - rank) * c, (2 * N - rank) * c)])

q = q_all[pos]
block = torch.stack([k_all[pos], v_all[pos]]).contiguous()
block_pos = pos.clone()
run_max = torch.full((len(pos), 1), float("-inf"))
run_sum, acc = torch.zeros(len(pos), 1), torch.zeros(len(pos), D)
pairs = 0
for step in range(N):
    if step < N - 1:
        inc, inc_pos = torch.empty_like(block), torch.empty_like(block_pos)
        reqs = dist.batch_isend_irecv([
            dist.P2POp(dist.isend, block, (rank + 1) % N), dist.P2POp(dist.irecv, inc, (rank - 1) % N),
            dist.P2POp(dist.isend, block_pos, (rank + 1) % N), dist.P2POp(dist.irecv, inc_pos, (rank - 1) % N)])
    allowed = block_pos[None, :] <= pos[:, None]               # causal mask for this pair of blocks
    pairs += int(allowed.sum())
    s = (q @ block[0].T / D ** 0.5).masked_fill(~allowed, float("-inf"))
    new_max = torch.maximum(run_max, s.amax(-1, keepdim=True))
    safe = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
    p, rescale = torch.exp(s - safe), torch.exp(run_max - safe)
    run_sum = run_sum * rescale + p.sum(-1, keepdim=True)
    acc = acc * rescale + p @ block[1]
    run_max = new_max
    if step < N - 1:
        for r in reqs:
            r.wait()
        block, block_pos = inc, inc_pos

counts = [torch.zeros(1, dtype=torch.int64) for _ in range(N)]
dist.all_gather(counts, torch.tensor([pairs]))
counts = [int(c) for c in counts]
report("matches_causal_attention", torch.allclose(acc / run_sum, full[pos], atol=1e-5))
report("pairs_scored_per_rank", counts)
report("busiest_over_mean", round(max(counts) / (sum(counts) / N), 4))
