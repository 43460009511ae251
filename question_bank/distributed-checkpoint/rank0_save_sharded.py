# Saving an FSDP2 model "the DDP way", from rank 0 only, on two gloo ranks.
#   torch_save_rank0:  rank 0 pickles model.state_dict() with torch.save
#   full_tensor_rank0: rank 0 gathers each DTensor with full_tensor(), then saves
#   dcp_every_rank:    every rank calls dcp.save (the fix)
# A later single-process job then tries to load the file into a plain model.
import time

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.fsdp import fully_shard


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 6), nn.Linear(6, 2))


model = make_model()
expected = {k: v.detach().clone() for k, v in model.state_dict().items()}
fully_shard(model)
mode = params.get("mode", "torch_save_rank0")

if mode == "torch_save_rank0":
    if rank == 0:
        torch.save(model.state_dict(), "/tmp/model.pt")
    dist.barrier()
    saved = torch.load("/tmp/model.pt", weights_only=False)
    w = saved["0.weight"]
    report("saved_type", type(w).__name__)
    report("saved_global_shape", list(w.shape))
    report("saved_rows_in_file", w.to_local().shape[0])   # the data actually pickled
    plain = make_model()
    try:
        plain.load_state_dict({k: v.to_local() for k, v in saved.items()})
        report("plain_load", "ok")
    except RuntimeError as e:
        report("plain_load", "size mismatch" if "size mismatch" in str(e) else str(e)[:80])
elif mode == "full_tensor_rank0":
    if rank == 0:
        start = time.perf_counter()
        try:
            full = {k: v.full_tensor() for k, v in model.state_dict().items()}  # a collective, on one rank
            torch.save(full, "/tmp/model.pt")
        except RuntimeError:
            report("failed_after_seconds_over_3", time.perf_counter() - start > 3.0)
            raise
    dist.barrier()
    report("finished", True)
else:
    dcp.save({"model": model.state_dict()}, checkpoint_id="/tmp/ckpt")
    dist.barrier()
    plain = make_model()
    with torch.no_grad():
        for p in plain.parameters():
            p.zero_()
    state = {"model": plain.state_dict()}
    dcp.load(state, checkpoint_id="/tmp/ckpt")
    report("plain_load", "ok")
    report("plain_matches_saved", all(torch.equal(plain.state_dict()[k], v) for k, v in expected.items()))
