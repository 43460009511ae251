# What one forward of an MLP block leaves for backward. Autograd's saved-tensor hooks see
# every tensor it packs for backward; each is listed under the module that saved it, and
# counted as new memory unless its storage was counted already (a parameter, or a tensor
# another module saved too). The account is taken for a micro-batch of `tokens` rows.
import torch
from torch import nn

torch.manual_seed(0)
act = nn.GELU() if params["activation"] == "gelu" else nn.ReLU()
block = nn.Sequential(nn.Linear(256, 1024), act, nn.Linear(1024, 256))
names = {"0": "linear 1", "1": params["activation"], "2": "linear 2"}


def account(tokens):
    x = torch.randn(tokens, 256)
    rows, owner = [], {}
    for name, p in block.named_parameters():
        rows.append({"category": "parameter", "name": name, "shape": list(p.shape),
                     "dtype": str(p.dtype).removeprefix("torch."), "bytes": p.nbytes,
                     "new_bytes": p.nbytes})
        owner[p.untyped_storage().data_ptr()] = f"parameter {name}"
    owner[x.untyped_storage().data_ptr()] = None      # the block's input: saved, not yet counted
    running = ["?"]

    def pack(t):
        where = t.untyped_storage().data_ptr()
        seen = owner.get(where)
        rows.append({"category": "saved for backward", "name": f"{running[0]}: {list(t.shape)}",
                     "shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch."),
                     "bytes": t.untyped_storage().nbytes(),
                     "new_bytes": 0 if seen else t.untyped_storage().nbytes(),
                     "note": f"the same storage as {seen}" if seen else ""})
        owner[where] = owner.get(where) or f"{running[0]}'s saved tensor"
        return t

    hooks = [m.register_forward_pre_hook(lambda m, a, n=n: running.__setitem__(0, names[n]))
             for n, m in block.named_children()]
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = block(x)
    for h in hooks:
        h.remove()
    return rows, out


rows, out = account(params["tokens"])
artifact("memory", "memory", {"moment": f"after the forward of {params['tokens']} tokens, "
                                        "before backward", "rows": rows})
saved = [r for r in rows if r["category"] == "saved for backward"]
report("saved_new_mib", sum(r["new_bytes"] for r in saved) / 2**20)
report("saved_rows", len(saved))
report("saved_sharing_storage", sum(r["new_bytes"] == 0 for r in saved))
bigger, _ = account(4 * params["tokens"])
report("saved_new_mib_at_4x_tokens",
       sum(r["new_bytes"] for r in bigger if r["category"] == "saved for backward") / 2**20)
out.sum().backward()                     # the saved tensors are used, then freed
report("parameter_mib", sum(p.nbytes for p in block.parameters()) / 2**20)
