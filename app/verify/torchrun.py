"""A question's snippet wrapped so it runs unchanged under `torchrun` on a learner's machine.

The script reproduces the page: the process group carries the run's timeout (gloo's
default is 30 minutes, so a hang question would otherwise sit for half an hour), and
each rank ends by printing the outcome the page diagnoses: finished, raised, or left
blocked in a collective until the timeout.
"""

from __future__ import annotations

import json
from typing import Any

from app.verify.engine.limits import Limits

TEMPLATE = '''#!/usr/bin/env python3
"""{title}

From DDP Drill (question: {slug}{variant}). Run it with:

    torchrun --nproc_per_node={world_size} {filename}

It sets up what DDP Drill's harness gives a snippet (a gloo process group and the
globals rank, world_size, params, report and artifact), then runs the snippet unchanged. The
process group times out after {timeout_s:g} s, as on DDP Drill (whose run is stopped
at {run_timeout_s:g} s), so a rank left waiting in a collective raises instead of
waiting for gloo's 30-minute default.
Each rank prints its outcome last (finished, raised, or blocked until the timeout).
Without NumPy installed, torchrun itself warns "Failed to initialize NumPy" before
the ranks start; it is harmless (PYTHONWARNINGS="ignore:Failed to initialize NumPy"
silences it).
"""
import json
import os
import sys
import traceback
import warnings
from datetime import timedelta

# torch warns at import when NumPy is missing; nothing here needs NumPy.
warnings.filterwarnings("ignore", message=".*NumPy.*")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

TIMEOUT_S = {timeout_s!r}
# Ranks start at different speeds on a busy machine; start-up gets its own allowance, and
# the group's timeout is the run's from the first collective of the snippet on.
STARTUP_TIMEOUT_S = 300
dist.init_process_group("gloo", timeout=timedelta(seconds=max(STARTUP_TIMEOUT_S, TIMEOUT_S)))
dist.barrier()
dist.distributed_c10d._set_pg_timeout(timedelta(seconds=TIMEOUT_S))
rank = dist.get_rank()
world_size = dist.get_world_size()
torch.set_num_threads(1)
params = json.loads({params_json!r})


def report(name, value):
    """Print a measured value, as DDP Drill's result panel shows it."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().tolist()
    print(f"[rank {{rank}}] {{name}} = {{json.dumps(value, default=str)}}", flush=True)


def artifact(name, kind, source):
    """Save what DDP Drill draws from torch's own tools: a profile as a Chrome trace (open it
    in Perfetto or chrome://tracing), a flight-recorder dump or a memory account as JSON."""
    if kind == "profile":
        path = f"{{name}}-rank{{rank}}.trace.json"
        source.export_chrome_trace(path)
    else:
        path = f"{{name}}-rank{{rank}}.json"
        with open(path, "w") as out:
            json.dump(source, out, default=str, indent=1)
    print(f"[rank {{rank}}] artifact {{name}} ({{kind}}) written to {{path}}", flush=True)


def outcome(exc):
    """The outcome DDP Drill's diagnosis gives this rank."""
    text = f"{{type(exc).__name__}}: {{exc}}"
    if "Timed out" in text or "timed out" in text or "Timeout" in text:
        return ("timeout: blocked in a collective for the whole process-group timeout "
                f"({{TIMEOUT_S:g}} s); another rank never joined it ({{text.splitlines()[0]}})")
    return f"error: raised {{text}}"


SNIPPET = {snippet!r}

try:
    exec(compile(SNIPPET, "snippet.py", "exec"), {{
        "__name__": "__snippet__", "rank": rank, "world_size": world_size,
        "params": params, "report": report, "artifact": artifact,
    }})
except BaseException as exc:  # the outcome is printed, then the rank fails as it did
    traceback.print_exc()
    print(f"[rank {{rank}}] outcome: {{outcome(exc)}}", flush=True)
    # Skip destroy_process_group: with a peer gone or still waiting it can block again.
    sys.stdout.flush()
    os._exit(1)
print(f"[rank {{rank}}] outcome: finished", flush=True)
dist.destroy_process_group()
'''


def torchrun_script(*, slug: str, title: str, snippet: str, world_size: int,
                    params: dict[str, Any], timeout_s: float = 10.0, variant: str = "") -> str:
    """A self-contained script: `torchrun --nproc_per_node=N <file>` runs the snippet as DDP Drill
    does, with the process-group timeout of a run of `timeout_s`, and prints each rank's
    outcome. `variant` names the question's variant (its values are in `params` already)."""
    return TEMPLATE.format(
        variant=_docstring_safe(f", {variant}") if variant else "",
        title=title.replace('"""', "'''"), slug=slug, world_size=world_size,
        filename=f"{slug}.py", params_json=json.dumps(params, sort_keys=True), snippet=snippet,
        timeout_s=round(pg_timeout_s(timeout_s), 3), run_timeout_s=float(timeout_s),
    )


def pg_timeout_s(run_timeout_s: float) -> float:
    """The gloo group's timeout in a run of this length (the engine's own rule)."""
    return Limits(timeout_s=float(run_timeout_s)).pg_timeout_s


def _docstring_safe(text: str) -> str:
    return text.replace(chr(34) * 3, chr(39) * 3)
