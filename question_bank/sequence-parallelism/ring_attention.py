# Context parallelism by hand: a 16-token sequence is cut into world_size blocks;
# rank r keeps its block of queries and starts with its own K/V block. Each step it
# attends to the K/V block it holds, merging the result with an online softmax
# (running max and sum), while it passes that block to rank r+1 and receives the
# next one from rank r-1. After world_size steps every query has seen every key.
import torch
import torch.distributed as dist

S, HEAD_DIM = 16, 8
torch.manual_seed(0)
q_all, k_all, v_all = torch.randn(3, S, HEAD_DIM).unbind(0)      # the same full sequence on every rank
full = torch.softmax(q_all @ k_all.T / HEAD_DIM ** 0.5, dim=-1) @ v_all   # unsplit attention, no mask

block = S // world_size
mine = slice(rank * block, (rank + 1) * block)
q = q_all[mine]
kv = torch.stack([k_all[mine], v_all[mine]]).contiguous()        # this rank's K and V, sent as one tensor
run_max = torch.full((block, 1), float("-inf"))
run_sum = torch.zeros(block, 1)
acc = torch.zeros(block, HEAD_DIM)
kv_sends, blocks_seen = 0, []
for step in range(world_size):
    blocks_seen.append((rank - step) % world_size)                 # whose K/V this rank holds now
    if step < world_size - 1:                                      # start the transfer, then compute
        incoming = torch.empty_like(kv)
        reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, kv, (rank + 1) % world_size),
                                       dist.P2POp(dist.irecv, incoming, (rank - 1) % world_size)])
        kv_sends += 1
    scores = q @ kv[0].T / HEAD_DIM ** 0.5
    new_max = torch.maximum(run_max, scores.max(dim=-1, keepdim=True).values)
    p = torch.exp(scores - new_max)
    rescale = torch.exp(run_max - new_max)
    run_sum = run_sum * rescale + p.sum(dim=-1, keepdim=True)
    acc = acc * rescale + p @ kv[1]
    run_max = new_max
    if step < world_size - 1:
        for req in reqs:
            req.wait()
        kv = incoming

report("matches_full_attention", torch.allclose(acc / run_sum, full[mine], atol=1e-5))
report("kv_sends", kv_sends)
report("kv_blocks_seen", blocks_seen)
report("kv_elements_per_send", kv.numel())
report("query_rows_held", q.shape[0])
