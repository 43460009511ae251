"""Every run is held to its limits, says which one it hit, and leaves nothing behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.verify.engine import Engine
from tests.verify.conftest import Run

GIB = 1024**3


@pytest.mark.parametrize("allocation", [
    "torch.empty(4 * 2**30, dtype=torch.uint8)",
    "bytearray(4 * 2**30)",
])
def test_memory_limit_stops_an_allocation_and_says_so(run: Run, allocation: str) -> None:
    result = run(f"""
    import torch
    if rank == 1:
        x = {allocation}
    """, memory_bytes=2 * GIB)
    assert (result.outcome, result.limit) == ("error", "memory")
    assert result.ranks[1].error is not None and result.ranks[1].error.line == 4
    assert result.ranks[0].exit_code == 0
    assert "ran out of memory under the 2 GiB address-space limit" in result.diagnosis


def test_cpu_limit_kills_a_spinning_rank(run: Run) -> None:
    result = run("""
    import torch.distributed as dist
    if rank == 1:
        while True:
            pass
    dist.barrier()
    """, cpu_seconds=1, timeout_s=20)
    assert (result.outcome, result.limit) == ("error", "cpu")
    assert result.ranks[1].signal == "SIGXCPU"
    assert result.ranks[0].blocked_in is not None and result.ranks[0].blocked_in.op == "barrier"
    assert result.diagnosis.startswith("Rank 1 failed first: it used up its 1 s of CPU time")


def test_output_flood_is_capped_and_stops_the_run(run: Run) -> None:
    # Rank 1 writes its line before rank 0 starts flooding (the barrier orders them),
    # so the flood's stop cannot race it.
    result = run("""
    import sys
    import torch.distributed as dist
    if rank == 1:
        print("quiet rank", file=sys.stderr, flush=True)
    dist.barrier()
    if rank == 0:
        while True:
            print("x" * 1000)
    """, output_bytes=8192)
    assert (result.outcome, result.limit) == ("error", "output")
    out = result.ranks[0].stdout
    assert out.startswith("x" * 1000)
    assert out.endswith("[truncated: output exceeded 8192 bytes]\n")
    assert len(out) < 8192 + 100
    assert result.ranks[1].stderr == "quiet rank\n"
    assert result.diagnosis.startswith("Rank 0 wrote more than 8192 bytes of output")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


SPAWNER = """
import os, subprocess, time
child = subprocess.Popen(["sleep", "300"])
# A grandchild in its own session, orphaned at once: it escapes any process group.
shell = subprocess.run(["sh", "-c", "setsid sleep 300 >/dev/null 2>&1 & echo $!"],
                       capture_output=True, text=True, check=True)
report("pids", [child.pid, int(shell.stdout)])
report("cwd", os.getcwd())
report("uid", os.getuid())
if params["hang"]:
    time.sleep(300)
"""


# Every process in the sandbox's PID namespace, with its real uid.
PROCESSES = """
import os
found = []
for name in os.listdir("/proc"):
    if name.isdigit():
        try:
            status = open(f"/proc/{name}/status").read()
        except OSError:
            continue
        uid = int(status.split("Uid:")[1].split()[0])
        state = status.split("State:")[1].split()[0]
        found.append([int(name), uid, state])
report("processes", found)
"""


@pytest.mark.parametrize("hang", [False, True], ids=["exits", "times-out"])
def test_processes_a_snippet_spawns_are_killed_and_its_folder_removed(
        engine: Engine, run: Run, hang: bool) -> None:
    result = run(SPAWNER, params={"hang": hang}, timeout_s=1.5)
    assert result.outcome == ("timeout" if hang else "ok"), result.diagnosis
    pids = [pid for r in result.ranks for pid in r.values["pids"]]
    assert len(pids) == 4
    assert result.leftover_processes == 4
    assert "4 processes started by the snippet were still alive" in result.diagnosis
    if engine.sandboxed:
        # The pids are the sandbox's own: look from inside, by the run's uid.
        later = run(PROCESSES, world_size=1)
        run_uid = result.ranks[0].values["uid"]
        assert [p for p in later.ranks[0].values["processes"] if p[1] == run_uid] == []
        assert {r.values["cwd"] for r in result.ranks} == {"/tmp"}
        return
    assert [pid for pid in pids if _alive(pid)] == []
    for r in result.ranks:
        assert not os.path.exists(r.values["cwd"])


def test_environment_is_scrubbed_of_the_app_settings(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DDPDRILL_SECRET_KEY", "do-not-leak")
    result = run("""
    import os
    report("env", sorted(os.environ))
    report("initial", open("/proc/self/environ").read())
    report("cwd", os.getcwd())
    import resource
    report("core", resource.getrlimit(resource.RLIMIT_CORE))
    """)
    assert result.outcome == "ok", result.diagnosis
    values = result.ranks[1].values
    assert not [k for k in values["env"] if k.startswith("DDPDRILL")]
    assert "DDPDRILL" not in values["initial"] and "do-not-leak" not in values["initial"]
    assert {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"} <= set(values["env"])
    assert values["core"] == [0, 0]


def test_group_timeout_is_shorter_than_the_run_timeout(run: Run) -> None:
    result = run("report('t', 1)", timeout_s=3)
    assert result.limits["timeout_s"] == 3
    assert 0 < result.limits["pg_timeout_s"] < 3
