import glob as _glob

import torch as _torch
import torch.distributed as _dist

report("resumed_step", resumed_step)
_w = _torch.cat([p.detach().flatten() for p in model.parameters()])
_w0 = _w.clone()
_dist.broadcast(_w0, src=0)
report("resumed_rank0_weights", bool(_torch.equal(_w, _w0)))
_dist.barrier()
report("checkpoint_files", len([f for f in _glob.glob("*") if not f.endswith(".py")
                                and not f.startswith("stack")]))
