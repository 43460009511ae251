"""DDPDRILL_SANDBOX: on by default, off only by choice, and said clearly when the host cannot do it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from app.verify.engine import Engine, SandboxUnavailable, sandbox_status
from app.verify.engine.sandbox import probe


def test_the_sandbox_is_on_by_default_and_reported_by_healthz(tmp_path: Path) -> None:
    assert Settings().sandbox is True
    with Engine() as engine:
        assert engine.sandboxed is True
    settings = Settings(data_dir=tmp_path, database_url=f"sqlite:///{tmp_path / 'db.sqlite'}",
                        secret_key="k" * 40, workers=0)
    with TestClient(create_app(settings)) as client:
        assert client.get("/healthz").json() == {"status": "ok", "sandbox": "on"}


def test_sandbox_off_is_reported_by_healthz_and_in_the_log(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    settings = Settings(data_dir=tmp_path, database_url=f"sqlite:///{tmp_path / 'db.sqlite'}",
                        secret_key="k" * 40, workers=0, sandbox="off")  # type: ignore[arg-type]
    assert settings.sandbox is False
    with caplog.at_level("INFO", logger="ddpdrill"):
        app = create_app(settings)
    assert any("WITHOUT the sandbox" in r.getMessage() and r.levelname == "ERROR"
               for r in caplog.records)
    with TestClient(app) as client:
        assert client.get("/healthz").json() == {"status": "ok", "sandbox": "off"}


def test_a_host_that_refuses_namespaces_is_named_with_the_reason() -> None:
    # An unprivileged process is such a host: the probe must say why, in words.
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.setresgid(65534, 65534, 65534)
            os.setresuid(65534, 65534, 65534)
            os.write(w, (probe() or "").encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        reason = f.read()
    os.waitpid(pid, 0)
    assert "must start as root" in reason
    assert probe() is None
    assert sandbox_status(True)[0] == "on"
    state, message = sandbox_status(False)
    assert state == "off" and "DDPDRILL_SANDBOX=off" in message


def test_an_engine_on_a_host_without_namespaces_refuses_runs_and_says_why(tmp_path: Path) -> None:
    # Root without CAP_SYS_ADMIN, as in a default container: unshare is refused.
    python = tmp_path / "python-without-sys-admin"
    python.write_text("#!/bin/sh\nexec setpriv --bounding-set -sys_admin --inh-caps -sys_admin "
                      f'{sys.executable} "$@"\n')
    python.chmod(0o755)
    with Engine(python=str(python)) as engine:
        with pytest.raises(SandboxUnavailable, match="Operation not permitted"):
            engine.start()
        with pytest.raises(SandboxUnavailable, match="sandbox is unavailable"):
            engine.run("report('ran', True)", world_size=1)
    with Engine(python=str(python), sandbox=False) as engine:
        result = engine.run("report('ran', True)", world_size=1)
    assert result.ranks[0].values == {"ran": True}


def test_sandbox_off_runs_ranks_unconfined() -> None:
    with Engine(sandbox=False) as engine:
        result = engine.run("""
import os
report("uid", os.getuid())
report("sees_server", os.path.exists(f"/proc/{params['server']}"))
import torch, torch.distributed as dist
t = torch.ones(1)
dist.all_reduce(t)
report("sum", t.item())
""", params={"server": os.getpid()})
    assert result.outcome == "ok", result.diagnosis
    assert [r.values for r in result.ranks] == [{"uid": 0, "sees_server": True, "sum": 2.0}] * 2
