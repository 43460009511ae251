from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass
class _ScaleState:
    scale: float
    growth_interval: int
    streak: int = 0


class ShardedLossScaler:
    def __init__(self, init_scale=1024.0, growth_interval=3, lr=0.1):
        self.state = _ScaleState(float(init_scale), int(growth_interval))
        self.lr = lr

    @property
    def scale(self):
        return self.state.scale

    def _all_finite(self, grad):
        # 1 where this rank's shard is finite; the MIN over ranks is 1 only if all are.
        ok = torch.tensor([int(bool(torch.isfinite(grad).all()))], dtype=torch.int32)
        dist.all_reduce(ok, op=dist.ReduceOp.MIN)
        return bool(ok.item())

    def step(self, shard, grad):
        st = self.state
        if not self._all_finite(grad):
            st.scale, st.streak = st.scale * 0.5, 0
            return False
        shard.data.add_(grad, alpha=-self.lr / st.scale)
        st.streak += 1
        if st.streak >= st.growth_interval:
            st.scale, st.streak = st.scale * 2.0, 0
        return True
