"""Probes installed inside a rank: they record what torch.distributed and DDP do without changing it.

Runs only in rank processes (it imports torch). One module per concern:
`collectives` wraps the torch.distributed entry points, `c10d` records what
reaches the c10d dispatcher ops by any other way (functional collectives of
DTensor and FSDP2, ProcessGroup methods), `ddp` follows DDP's
forward, backward, gradient buckets and Join, `pipeline` each pipeline stage's
micro-batches, `sockets` counts the bytes gloo
sends, and `core` holds what they share (the emitter, sequence numbers, who
called, completion tracking). Each module that touches torch lists what it
patches or reads in `TORCH_ATTRIBUTES`.
"""

from __future__ import annotations

from app.verify.engine.probes import c10d, collectives, ddp, pipeline
from app.verify.engine.probes.core import SNIPPET_FILE, Emit, Recorder

__all__ = ["PROBE_MODULES", "SNIPPET_FILE", "Probes"]

# The modules that patch or read torch, each with its TORCH_ATTRIBUTES.
PROBE_MODULES = (collectives, c10d, ddp, pipeline)


class Probes(Recorder):
    """Every probe of one rank, installed together, sharing one recorder."""

    def __init__(self, emit: Emit, *, store_port: int, trace_buckets: bool = True) -> None:
        super().__init__(emit, store_port=store_port)
        self.trace_buckets = trace_buckets

    def install(self) -> None:
        collectives.install(self)
        c10d.install(self)
        ddp.DdpProbes(self, trace_buckets=self.trace_buckets).install()
        pipeline.install(self)
