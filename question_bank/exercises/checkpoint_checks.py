import glob as _glob
import os as _os

import torch as _torch
import torch.distributed as _dist

report("resumed_step", resumed_step)
_w = _torch.cat([p.detach().flatten() for p in model.parameters()])
_w0 = _w.clone()
_dist.broadcast(_w0, src=0)
report("resumed_rank0_weights", bool(_torch.equal(_w, _w0)))
_dist.barrier()
# Files only: the scratch folder may also hold read-only mount points of the install.
report("checkpoint_files", len([f for f in _glob.glob("*") if _os.path.isfile(f)
                                and not f.endswith(".py") and not f.startswith("stack")]))
