import torch
import torch.distributed as dist


def moe_forward(tokens, expert_ids, experts, experts_per_rank):
    """Send every token to the rank that holds its expert, apply the expert, bring it back."""
    n = dist.get_world_size()
    dest = torch.div(expert_ids, experts_per_rank, rounding_mode="floor")
    order = torch.sort(dest, stable=True).indices
    send_counts = torch.stack([(dest == r).sum() for r in range(n)])
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts)
    send, recv = send_counts.tolist(), recv_counts.tolist()
    # One message for the tokens and their expert ids together: the ids ride as an extra column.
    packed = torch.cat([tokens.index_select(0, order),
                        expert_ids.index_select(0, order).to(tokens.dtype).unsqueeze(1)], dim=1)
    got = packed.new_empty(sum(recv), packed.shape[1])
    dist.all_to_all_single(got, packed, output_split_sizes=recv, input_split_sizes=send)
    got_tokens, got_ids = got[:, :-1], got[:, -1].round().long()
    done = torch.zeros_like(got_tokens)
    for e, expert in experts.items():
        rows = (got_ids == e).nonzero().squeeze(1)
        if rows.numel():
            done.index_copy_(0, rows, expert(got_tokens.index_select(0, rows)))
    back = torch.empty_like(tokens)
    dist.all_to_all_single(back, done, output_split_sizes=send, input_split_sizes=recv)
    return torch.empty_like(back).index_copy_(0, order, back)
