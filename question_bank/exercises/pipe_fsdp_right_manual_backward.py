from dataclasses import dataclass, field

import torch
import torch.distributed as dist


@dataclass
class StageShard:
    """What one rank keeps between steps: its stage, its group and its rows of each weight."""
    stage: int
    group: object
    rows: list = field(default_factory=list)

    def gathered(self):
        out = []
        for shard in self.rows:
            full = torch.empty(2 * shard.shape[0], shard.shape[1])
            dist.all_gather_into_tensor(full, shard, group=self.group)
            out.append(full)
        return out

    def apply(self, grads, lr):
        for shard, g in zip(self.rows, grads):
            mine = torch.empty_like(shard)
            dist.reduce_scatter_tensor(mine, g.contiguous(), group=self.group)
            shard.sub_(mine, alpha=lr / 2)  # two pipelines' gradients were summed


class PipelineFSDP:
    def __init__(self, layers):
        stage, half = divmod(dist.get_rank(), 2)
        groups = {0: dist.new_group([0, 1]), 1: dist.new_group([2, 3])}
        n = len(layers) // 2
        self.state = StageShard(stage, groups[stage])
        for layer in layers[stage * n:(stage + 1) * n]:
            self.state.rows.append(layer.weight.detach().chunk(2)[half].clone())

    @property
    def shards(self):
        return self.state.rows

    def train_step(self, x, y, lr):
        st = self.state
        peer = dist.get_rank() + (2 if st.stage == 0 else -2)
        ws = st.gathered()
        if st.stage == 1:
            x = torch.empty(y.shape[0], ws[0].shape[1])
            dist.recv(x, src=peer)
        # Forward by hand, keeping each layer's input and tanh output.
        inputs, acts = [], []
        h = x
        for i, w in enumerate(ws):
            inputs.append(h)
            h = h @ w.t()
            if i < len(ws) - 1 or st.stage == 0:
                h = torch.tanh(h)
                acts.append(h)
            else:
                acts.append(None)  # the model's last layer is linear
        if st.stage == 0:
            dist.send(h, dst=peer)
            g = torch.empty_like(h)
            dist.recv(g, src=peer)
            loss = None
        else:
            loss = (h - y).pow(2).mean().item()
            g = 2 * (h - y) / h.numel()
        # Backward by hand, last layer first.
        grads = [None] * len(ws)
        for i in reversed(range(len(ws))):
            if acts[i] is not None:
                g = g * (1 - acts[i] * acts[i])
            grads[i] = g.t() @ inputs[i]
            g = g @ ws[i]
        if st.stage == 1:
            dist.send(g, dst=peer)  # the gradient of the stage's input goes back
        del ws
        st.apply(grads, lr)
        return loss
