# The same three numbers stored as float16 and as bfloat16: a tiny gradient (1e-8),
# a large activation (1e5) and 1 + 2**-9, each read back in float32.
import math

import torch

for dtype, name in ((torch.float16, "fp16"), (torch.bfloat16, "bf16")):
    tiny, large, one_plus = (torch.tensor(v, dtype=dtype).float().item() for v in (1e-8, 1e5, 1 + 2 ** -9))
    report(f"{name}_tiny_is_zero", tiny == 0.0)
    report(f"{name}_large_is_inf", math.isinf(large))
    report(f"{name}_large", large if math.isfinite(large) else None)
    report(f"{name}_one_plus_is_one", one_plus == 1.0)
    report(f"{name}_max", torch.finfo(dtype).max)
