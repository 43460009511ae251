"""The engine's contract with its callers: validation, threads, restarts, failures."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from app.verify.engine import (
    HARNESS_VERSION,
    Engine,
    EngineFailure,
    Limits,
    SnippetSyntaxError,
    check_snippet,
    get_engine,
    torch_version,
)
from app.verify.engine.result import RESULT_VERSION, RunResult


def test_check_snippet_reports_the_line_of_a_syntax_error() -> None:
    check_snippet("x = 1\n")
    with pytest.raises(SnippetSyntaxError) as info:
        check_snippet("x = 1\nif x\n    pass\n")
    assert info.value.line == 2
    with pytest.raises(SnippetSyntaxError):
        check_snippet("x = '\0'\x00")


def test_check_snippet_refuses_nested_lambdas_before_compiling_them() -> None:
    """2,000 nested lambdas fit in the 20 KB cap and would cost the web process 0.7 s of CPU
    to compile (nested scopes are quadratic); the count is refused first."""
    check_snippet("f = " + "lambda a: " * 50 + "0\n")
    with pytest.raises(SnippetSyntaxError, match="2000 lambdas"):
        check_snippet("f = " + "lambda a: " * 2000 + "0\n")


def test_torch_version_comes_from_metadata_without_importing_torch() -> None:
    assert torch_version().startswith("2.")
    assert HARNESS_VERSION
    assert RESULT_VERSION >= 1


def test_limits_validate_and_derive_a_shorter_group_timeout() -> None:
    assert Limits().timeout_s == 10 and Limits().pg_timeout_s == 8
    assert Limits(timeout_s=3).pg_timeout_s == pytest.approx(2.4)
    with pytest.raises(ValueError):
        Limits(timeout_s=0)
    with pytest.raises(ValueError):
        Limits(memory_bytes=100)


def test_limits_follow_the_settings() -> None:
    from app.settings import Settings

    settings = Settings(verify_timeout_s=4, verify_memory_bytes=2 * 1024**3,
                        verify_cpu_seconds=7, verify_output_bytes=4096)
    assert Limits.from_settings(settings) == Limits(
        timeout_s=4, memory_bytes=2 * 1024**3, cpu_seconds=7, output_bytes=4096)


def test_run_rejects_bad_arguments_before_starting_anything(engine: Engine) -> None:
    with pytest.raises(ValueError):
        engine.run("pass", world_size=9)
    with pytest.raises(ValueError):
        engine.run("pass", world_size=0)
    with pytest.raises(ValueError):
        engine.run("pass", params={"x": object()})
    with pytest.raises(SnippetSyntaxError):
        engine.run("def f(:\n  pass")


def test_result_round_trips_through_json(engine: Engine) -> None:
    result = engine.run("report('x', rank)", params={"a": 1})
    again = RunResult.model_validate_json(result.model_dump_json())
    assert again == result
    assert (again.params, again.torch_version, again.harness_version) == (
        {"a": 1}, torch_version(), HARNESS_VERSION)
    assert again.timings["wall_ms"] > 0


def test_two_threads_can_run_at_once(engine: Engine) -> None:
    results: dict[int, RunResult] = {}

    def go(k: int) -> None:
        results[k] = engine.run("""
import torch, torch.distributed as dist
t = torch.full((2,), float(params["k"] + rank))
dist.all_reduce(t)
report("t", t)
""", params={"k": k})

    threads = [threading.Thread(target=go, args=(k,)) for k in (10, 20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert results[10].ranks[0].values == {"t": [21.0, 21.0]}
    assert results[20].ranks[1].values == {"t": [41.0, 41.0]}


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_dead_forkserver_is_restarted_on_the_next_run(engine: Engine) -> None:
    pid = engine.forkserver_pid
    starts = engine.forkserver_starts
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    result = engine.run("report('ok', True)")
    assert result.outcome == "ok"
    assert engine.forkserver_starts == starts + 1 and engine.forkserver_pid != pid


def test_a_closed_engine_raises_engine_failure() -> None:
    eng = Engine()
    eng.close()
    with pytest.raises(EngineFailure):
        eng.run("pass")


def test_get_engine_is_one_engine_per_process() -> None:
    assert get_engine() is get_engine()


def test_ranks_and_their_leader_are_named_for_ps_and_perf(engine: Engine) -> None:
    result = engine.run(
        "import os\n"
        "report('me', open('/proc/self/comm').read().strip())\n"
        "report('parent', open(f'/proc/{os.getppid()}/comm').read().strip())\n",
        world_size=2)
    assert result.outcome == "ok", result.diagnosis
    assert [r.values["me"] for r in result.ranks] == ["ddp-rank-0", "ddp-rank-1"]
    assert {r.values["parent"] for r in result.ranks} == {"ddp-leader"}
