# A real restart: train a DDP model, save through the learner's save_checkpoint, then give
# every rank a fresh model with weights of its own and resume through load_checkpoint.
# torch.serialization's writers are wrapped to count the files each rank writes, and on
# rank 0 to write slowly, so a rank that reads before rank 0 is done finds no file.
import os as _os
import time as _time

import torch as _torch
import torch.distributed as _dist
import torch.serialization as _ser
from torch import nn as _nn
from torch.nn.parallel import DistributedDataParallel as _DDP

_written = set()
_zip_writer, _file_like = _ser._open_zipfile_writer, _ser._open_file_like


def _count(f):
    name = getattr(f, "name", f)
    _written.add(_os.path.abspath(name) if isinstance(name, str) else repr(name))


def _slow_zip_writer(f):
    _count(f)
    if rank == 0:
        _time.sleep(0.5)
    return _zip_writer(f)


def _counted_file_like(f, mode):
    if any(c in mode for c in "wax+"):
        _count(f)
    return _file_like(f, mode)


_ser._open_zipfile_writer = _slow_zip_writer
_ser._open_file_like = _counted_file_like

_torch.manual_seed(0)
_model = _nn.Linear(4, 2)
_ddp = _DDP(_model)
_opt = _torch.optim.SGD(_model.parameters(), lr=0.1)
for _step in range(5):
    _opt.zero_grad()
    _ddp(_torch.full((3, 4), float(rank + _step))).pow(2).mean().backward()
    _opt.step()

_path = "checkpoint.pt"
save_checkpoint(_model, 5, _path)
_torch.manual_seed(1000 + rank)  # the restarted rank's own initialisation
_fresh = _nn.Linear(4, 2)
_resumed = load_checkpoint(_fresh, _path)
_dist.barrier()  # every rank has loaded: count what is on disk
report("resumed_step", _resumed)
report("resumed_weights", _torch.cat([p.detach().flatten() for p in _fresh.parameters()]))
report("files_written", len(_written))
# Files only, not the harness's hidden ones or the learner's code; the scratch folder may
# also hold read-only mount points of the install.
report("checkpoint_files", len([f for f in _os.listdir(".") if _os.path.isfile(f)
                                and not f.startswith(".") and not f.endswith(".py")]))
