# A model with dropout trains 5 steps uninterrupted. A second run stops after step 3 and
# resumes from a checkpoint of the model and the optimizer; like the original script, the
# restarted process calls torch.manual_seed(0) first. With restore_rng, the checkpoint also
# holds torch.get_rng_state() and the resumed run restores it.
import copy

import torch
from torch import nn


def fresh():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5), nn.Linear(8, 1))
    # Record which activations dropout zeroed at each step.
    model[1].register_forward_hook(lambda mod, inp, out: masks.append((out == 0) & (inp[0] != 0)))
    return model, torch.optim.SGD(model.parameters(), lr=0.1)


masks = []


def step(model, opt, i):
    x = torch.ones(4, 8) / (i + 1)
    out = model(x)
    loss = out.square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()


model, opt = fresh()
full = [step(model, opt, i) for i in range(5)]
full_masks = masks[:]
masks.clear()

model, opt = fresh()
part = [step(model, opt, i) for i in range(3)]
ckpt = copy.deepcopy({"model": model.state_dict(), "opt": opt.state_dict(), "rng": torch.get_rng_state()})

model, opt = fresh()                                   # the restarted process: seeds as it always does
model.load_state_dict(ckpt["model"])
opt.load_state_dict(ckpt["opt"])
if params["restore_rng"]:
    torch.set_rng_state(ckpt["rng"])
masks.clear()
resumed = part + [step(model, opt, i) for i in range(3, 5)]
report("resumed_equals_uninterrupted", resumed == full)
report("step4_mask_is_step1_mask", torch.equal(masks[0], full_masks[0]))
report("step4_mask_is_step4_mask", torch.equal(masks[0], full_masks[3]))
