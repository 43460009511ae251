# Ten small activations, 0.0001 to 0.001, cast to float8 E4M3 (largest finite value 448)
# with or without a per-tensor scale of 448 / amax, then read back in float32.
import torch

x = torch.arange(1, 11, dtype=torch.float32) * 1e-4
if params["scaling"] == "per_tensor":
    scale = 448.0 / x.abs().max()
else:
    scale = torch.tensor(1.0)
fp8 = (x * scale).to(torch.float8_e4m3fn)           # what would be stored or sent
back = fp8.float() / scale
rel_err = ((back - x).abs() / x)

report("zeros_after_cast", int((back == 0).sum()))
report("max_relative_error_of_nonzeros", round(rel_err[back != 0].max().item(), 4))
report("largest_read_back", back.max().item())
report("values_read_back", [float(f"{v:.3g}") for v in back.tolist()])
