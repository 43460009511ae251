# A 4-layer MLP split into two pipeline stages, one per rank, run by
# torch.distributed.pipelining on a batch of 8 rows cut into micro-batches.
# A forward hook on each stage records "F<mb>" and a gradient hook on its output
# "B<mb>", so `order` is the sequence in which this stage ran forward and backward.
import torch
from torch import nn
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe


def mlp():
    return nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(),
                         nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4))


def mse(out, target):                    # mean over each micro-batch
    return ((out - target) ** 2).mean()


torch.manual_seed(0)
full = mlp()
stage_module = full[:4] if rank == 0 else full[4:]      # stage 0 on rank 0, stage 1 on rank 1
order = []


def record_forward(module, args, out):
    mb = sum(1 for event in order if event.startswith("F"))
    order.append(f"F{mb}")
    out.register_hook(lambda grad, mb=mb: order.append(f"B{mb}"))


stage_module.register_forward_hook(record_forward)
stage = PipelineStage(stage_module, stage_index=rank, num_stages=world_size, device=torch.device("cpu"))
schedule_class = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}[params.get("schedule", "1f1b")]
n_mb = params.get("n_microbatches", 4)
try:
    schedule = schedule_class(stage, n_microbatches=n_mb, loss_fn=mse,
                              scale_grads=params.get("scale_grads", True))
    report("construction_error", None)
except ValueError as exc:
    report("construction_error", str(exc))
    schedule = None

if schedule is not None:
    x, y = torch.randn(8, 8), torch.randn(8, 4)

    def one_step():
        if rank == 0:
            schedule.step(x)               # the first stage gets the whole batch and chunks it
        else:
            schedule.step(target=y)        # the last stage gets the targets and computes the loss

    one_step()                             # the first step also infers shapes: leave it out of the record
    order.clear()
    stage_module.zero_grad()
    one_step()

    in_flight = peak = 0
    for event in order:                    # micro-batches whose activations this stage is holding
        in_flight += 1 if event.startswith("F") else -1
        peak = max(peak, in_flight)
    report("order", order)
    report("peak_in_flight", peak)

    reference = mlp()
    reference.load_state_dict(full.state_dict())
    mse(reference(x), y).backward()        # the same loss on the whole batch, no pipeline
    mine = stage_module[0].weight.grad
    theirs = (reference[0] if rank == 0 else reference[4]).weight.grad
    report("grad_over_full_batch_grad", round((mine.norm() / theirs.norm()).item(), 4))
    report("grad_matches_full_batch", torch.allclose(mine, theirs, atol=1e-6))
