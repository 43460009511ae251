# How far apart are adjacent bfloat16 numbers near a given logit value? Read from the bit
# patterns: the next representable number above x has the next 16-bit pattern.
import torch

x = torch.tensor(float(params["logit"]), dtype=torch.bfloat16)
bits = x.view(torch.int16)
above = (bits + 1).view(torch.bfloat16)
report("stored_as", x.float().item())
report("spacing", (above.float() - x.float()).item())
near = torch.tensor([params["logit"] + d for d in (0.0, 0.1, 0.3, 0.6)]).to(torch.bfloat16)
report("distinct_after_cast", len(set(near.float().tolist())))
