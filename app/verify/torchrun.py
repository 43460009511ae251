"""A question's snippet wrapped so it runs unchanged under `torchrun` on a learner's machine."""

from __future__ import annotations

import json
from typing import Any

TEMPLATE = '''#!/usr/bin/env python3
"""{title}

From DDP Drill (question: {slug}). Run it with:

    torchrun --nproc_per_node={world_size} {filename}

It sets up what DDP Drill's harness gives a snippet (a gloo process group and the
globals rank, world_size, params and report), then runs the snippet unchanged.
"""
import json
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
world_size = dist.get_world_size()
torch.set_num_threads(1)
params = json.loads({params_json!r})


def report(name, value):
    """Print a measured value, as DDP Drill's result panel shows it."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().tolist()
    print(f"[rank {{rank}}] {{name}} = {{json.dumps(value, default=str)}}", flush=True)


SNIPPET = {snippet!r}

try:
    exec(compile(SNIPPET, "snippet.py", "exec"), {{
        "__name__": "__snippet__", "rank": rank, "world_size": world_size,
        "params": params, "report": report,
    }})
finally:
    if dist.is_initialized():
        dist.destroy_process_group()
'''


def torchrun_script(*, slug: str, title: str, snippet: str, world_size: int,
                    params: dict[str, Any]) -> str:
    """A self-contained script: `torchrun --nproc_per_node=N <file>` runs the snippet as DDP Drill does."""
    return TEMPLATE.format(
        title=title.replace('"""', "'''"), slug=slug, world_size=world_size,
        filename=f"{slug}.py", params_json=json.dumps(params, sort_keys=True), snippet=snippet,
    )
