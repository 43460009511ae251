import torch
import torch.distributed as dist


def moe_forward(tokens, expert_ids, experts, experts_per_rank):
    n = dist.get_world_size()
    dest = expert_ids // experts_per_rank
    order = torch.argsort(dest, stable=True)  # group the tokens by destination rank
    send_counts = torch.bincount(dest, minlength=n)
    # First the sizes: rank j learns how many tokens each rank is about to send it.
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts)
    send, recv = send_counts.tolist(), recv_counts.tolist()

    got_tokens = tokens.new_empty(sum(recv), tokens.shape[1])
    dist.all_to_all_single(got_tokens, tokens[order], output_split_sizes=recv, input_split_sizes=send)
    got_ids = expert_ids.new_empty(sum(recv))
    dist.all_to_all_single(got_ids, expert_ids[order], output_split_sizes=recv, input_split_sizes=send)

    done = torch.zeros_like(got_tokens)
    for e, expert in experts.items():
        mine = got_ids == e
        done[mine] = expert(got_tokens[mine])

    # The way back is the same exchange with the split sizes swapped.
    back = torch.empty_like(tokens)
    dist.all_to_all_single(back, done, output_split_sizes=send, input_split_sizes=recv)
    return back  # still grouped by destination rank, not in the tokens' order
