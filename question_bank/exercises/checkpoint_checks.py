# A real restart: train a DDP model on this rank's own secret data, save through the
# learner's save_checkpoint in the folder the ranks share, then give every rank a fresh model
# with weights of its own and resume through load_checkpoint. Rank 0's disk is slow, so a rank
# that reads before rank 0 is done finds no file. The driver counts the files each rank's
# process left in the shared folder.
import os as _os
import time as _time

import torch as _torch
import torch.serialization as _ser
from torch import nn as _nn
from torch.nn.parallel import DistributedDataParallel as _DDP

_zip_writer = _ser._open_zipfile_writer


def _slow_zip_writer(f):
    if rank == 0:
        _time.sleep(0.5)
    return _zip_writer(f)


_ser._open_zipfile_writer = _slow_zip_writer

_data = _torch.Generator().manual_seed(rank_seed)
_model = _nn.Linear(4, 2)
_ddp = _DDP(_model)
_opt = _torch.optim.SGD(_model.parameters(), lr=0.1)
for _step in range(5):
    _opt.zero_grad()
    _ddp(_torch.randn(3, 4, generator=_data)).pow(2).mean().backward()
    _opt.step()

_path = _os.path.join(shared_folder, "checkpoint.pt")
save_checkpoint(_model, 5, _path)
_torch.manual_seed(rank_seed + 1)  # the restarted rank's own initialisation
_fresh = _nn.Linear(4, 2)
_resumed = load_checkpoint(_fresh, _path)
report("resumed_step", _resumed)
report("resumed_weights", _torch.cat([p.detach().flatten() for p in _fresh.parameters()]))
