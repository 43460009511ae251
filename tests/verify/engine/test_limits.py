"""Every run is held to its limits, says which one it hit, and leaves nothing behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.verify.engine import Engine
from tests.verify.helpers import Run

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


MIB = 2**20
# The stored result of a flooded run: 2 ranks x 2 streams x the cap, plus the trace.
SMALL_RESULT_BYTES = 1_000_000


def _kept(text: str, total: int, cap: int, fill: str) -> None:
    """A flooded stream: its first `cap` bytes, then the marker saying how much was written."""
    marker = f"\n[truncated: {total} bytes written, the first {cap} kept]\n"
    assert text.endswith(marker), text[-200:]
    assert text[: -len(marker)] == fill * cap


def test_a_200_mb_stdout_flood_is_truncated_and_the_run_completes(run: Run) -> None:
    # The barrier and the all_reduce after the flood prove both ranks went on running.
    result = run("""
    import sys
    import torch
    import torch.distributed as dist
    if rank == 0:
        chunk = "x" * 2**20
        for _ in range(200):
            sys.stdout.write(chunk)
    else:
        print("quiet rank")
    dist.barrier()
    t = torch.ones(1)
    dist.all_reduce(t)
    report("sum", t.item())
    """, timeout_s=60)
    assert (result.outcome, result.limit) == ("ok", None), result.diagnosis
    assert [r.values for r in result.ranks] == [{"sum": 2.0}, {"sum": 2.0}]
    flooded, quiet = result.ranks
    _kept(flooded.stdout, 200 * MIB, 65536, "x")
    assert (flooded.stdout_bytes, flooded.stderr, flooded.stderr_bytes) == (200 * MIB, "", 0)
    assert (quiet.stdout, quiet.stdout_bytes) == ("quiet rank\n", 11)
    assert [e["killed_by"] for r in result.ranks for e in r.events if e["kind"] == "exit"] == [None, None]
    assert "Rank 0 wrote 209,715,200 bytes to stdout; the first 65,536 are kept." in result.diagnosis
    assert result.diagnosis.startswith("All 2 ranks finished the snippet normally.")
    assert len(result.model_dump_json()) < SMALL_RESULT_BYTES


def test_both_ranks_flooding_both_streams_keep_each_head_and_the_snippets_own_error(
    run: Run
) -> None:
    # Interleaved writes to both streams, then rank 1 fails: the outcome is its error,
    # not a limit, and each of the four streams keeps its own first part.
    result = run("""
    import sys
    out, err = "o" * 2**20, "e" * 2**20
    for _ in range(40):
        sys.stdout.write(out)
        sys.stderr.write(err)
    sys.stdout.flush()
    sys.stderr.flush()
    if rank == 1:
        raise ValueError("after the flood")
    """, timeout_s=60, output_bytes=4096)
    assert (result.outcome, result.limit) == ("error", None), result.diagnosis
    assert result.ranks[0].exit_code == 0 and result.ranks[0].error is None
    error = result.ranks[1].error
    assert error is not None and (error.type, error.message, error.line) == (
        "ValueError", "after the flood", 10)
    for r in result.ranks:
        _kept(r.stdout, 40 * MIB, 4096, "o")
        # rank 1's traceback follows the flood on stderr, so it is counted but not kept
        assert r.stderr_bytes is not None and r.stderr_bytes >= 40 * MIB
        _kept(r.stderr, r.stderr_bytes, 4096, "e")
        for stream in ("stdout", "stderr"):
            total = getattr(r, f"{stream}_bytes")
            assert f"Rank {r.rank} wrote {total:,} bytes to {stream}; the first 4,096 are kept." \
                in result.diagnosis
    assert result.diagnosis.startswith("Rank 1 failed first")
    assert len(result.model_dump_json()) < SMALL_RESULT_BYTES


def test_an_endless_flood_meets_the_time_limit_with_its_head_kept(run: Run) -> None:
    result = run("""
    while True:
        print("y" * 1000)
    """, timeout_s=2, output_bytes=8192)
    assert (result.outcome, result.limit) == ("timeout", "timeout")
    for r in result.ranks:
        assert r.stdout_bytes is not None and r.stdout_bytes > 8192
        assert r.stdout.startswith(("y" * 1000 + "\n") * 8)
        assert r.stdout.endswith(f"\n[truncated: {r.stdout_bytes} bytes written, the first 8192 kept]\n")
        assert r.signal == "SIGKILL" and r.stack is not None and "snippet.py" in r.stack
    assert len(result.model_dump_json()) < SMALL_RESULT_BYTES


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
