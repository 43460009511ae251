# The same 4-layer MLP, pipelined over 2 ranks either as 2 stages (Schedule1F1B,
# one stage per rank) or as 4 virtual stages (ScheduleInterleaved1F1B, rank r
# holding stages r and r + 2). We count the point-to-point sends each rank makes
# in one training step by wrapping each stage's get_fwd_send_ops / get_bwd_send_ops,
# which return the P2P sends (activations forward, gradients backward) it is about to post.
import torch
from torch import nn
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleInterleaved1F1B

sends = {"n": 0}


def count_sends(stage):
    for name in ("get_fwd_send_ops", "get_bwd_send_ops"):
        original = getattr(stage, name)

        def wrapped(*args, _original=original, **kwargs):
            ops = _original(*args, **kwargs)
            sends["n"] += len(ops)
            return ops
        setattr(stage, name, wrapped)
    return stage


def mse(out, target):
    return ((out - target) ** 2).mean()


torch.manual_seed(0)
full = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(),
                     nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4))
interleaved = params.get("schedule", "interleaved") == "interleaved"
forwards = {"n": 0}


def count_forward(module, args, out):
    forwards["n"] += 1


if interleaved:
    chunks = [full[0:2], full[2:4], full[4:6], full[6:]]
    mine = [rank, rank + world_size]                       # virtual stages held by this rank
    stages = [count_sends(PipelineStage(chunks[i], i, len(chunks), torch.device("cpu"))) for i in mine]
    for i in mine:
        chunks[i].register_forward_hook(count_forward)
    schedule = ScheduleInterleaved1F1B(stages, n_microbatches=4, loss_fn=mse)
    first, last = 0 in mine, len(chunks) - 1 in mine
else:
    module = full[:4] if rank == 0 else full[4:]
    module.register_forward_hook(count_forward)
    schedule = Schedule1F1B(count_sends(PipelineStage(module, rank, world_size, torch.device("cpu"))),
                            n_microbatches=4, loss_fn=mse)
    first, last = rank == 0, rank == world_size - 1
x, y = torch.randn(8, 8), torch.randn(8, 4)


def one_step():
    if first:
        schedule.step(x)
    else:
        schedule.step(target=y)


one_step()                                                  # shape inference happens here
sends["n"] = forwards["n"] = 0
one_step()
report("sends_per_step", sends["n"])
report("chunk_forwards_per_step", forwards["n"])
