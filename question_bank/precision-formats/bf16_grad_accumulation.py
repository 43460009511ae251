# Gradient accumulation into a bf16 .grad: one weight, n_terms backward passes, each
# contributing exactly `contrib` to the gradient. The same loop on an fp32 weight beside it.
import torch

n_terms, contrib = params["n_terms"], params["contrib"]
w_bf16 = torch.nn.Parameter(torch.zeros(1, dtype=torch.bfloat16))
w_fp32 = torch.nn.Parameter(torch.zeros(1))
x = torch.tensor([contrib])
for _ in range(n_terms):
    (w_bf16 * x.to(torch.bfloat16)).sum().backward()   # autograd adds into .grad in the parameter's dtype
    (w_fp32 * x).sum().backward()

report("grad_dtype", str(w_bf16.grad.dtype))
report("bf16_grad", w_bf16.grad.float().item())
report("fp32_grad", w_fp32.grad.item())
