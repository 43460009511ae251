"""The installed `ddpdrill` command, run as a subprocess the way a user runs it.

tests/cli/test_cli.py calls the commands in-process, where the test session has
already imported the whole app; that hid a crash a user hit (`bank import` on an
explicit database URL found no `users` table, because only some entry points
happened to import every model). Here each command is a fresh process started
from the virtualenv's console script with a clean environment, on three
databases: the embedded default (only DDPDRILL_DATA_DIR), an explicit
`sqlite:///` URL, and PostgreSQL (a fresh schema, when DDPDRILL_TEST_DATABASE_URL
is set). One subprocess per command and database; each test chains the commands
in the order a new deployment would run them.
"""

from __future__ import annotations

import filecmp
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from tests.databases import PG_ENV, scratch_pg_schema
from tests.factories import FIXTURE_BANK

DDPDRILL = Path(sys.executable).parent / "ddpdrill"
# A command that starts no gloo run finishes in a few seconds even on a busy machine.
COMMAND_TIMEOUT_S = 60
# `bank verify` and `verify FILE` start a forkserver and run real ranks.
ENGINE_COMMAND_TIMEOUT_S = 180
# How long `serve` and `worker` get to come up, and to stop after SIGTERM.
START_TIMEOUT_S = 90
STOP_TIMEOUT_S = 60
PASSWORD = "correct horse battery staple"

SNIPPET = """\
import torch
import torch.distributed as dist

t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
report("sum", t.item())
print("rank", rank, "done")
"""


def _databases() -> list[str]:
    return ["default", "sqlite-url", "postgresql"] if os.environ.get(PG_ENV) else ["default",
                                                                                  "sqlite-url"]


@dataclass
class Deployment:
    """A fresh working directory, environment and empty database, as a new user starts with."""

    kind: str
    home: Path
    url: str
    env: dict[str, str] = field(default_factory=dict)

    def run(self, *args: object, stdin: str | None = None,
            timeout: float = COMMAND_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        """`ddpdrill ARGS` in the deployment's directory; the process's exit, stdout and stderr."""
        return subprocess.run([str(DDPDRILL), *map(str, args)], cwd=self.home, env=self.env,
                              input=stdin, capture_output=True, text=True, timeout=timeout,
                              check=False)

    def start(self, *args: object) -> subprocess.Popen[str]:
        return subprocess.Popen([str(DDPDRILL), *map(str, args)], cwd=self.home, env=self.env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)

    def scalar(self, sql: str) -> object:
        """One value read straight from the database, without the app's models."""
        engine = create_engine(self.url)
        try:
            with engine.connect() as conn:
                return conn.execute(text(sql)).scalar()
        finally:
            engine.dispose()


def _clean_env(home: Path) -> dict[str, str]:
    """What a login shell gives a user: no PYTHONPATH, no DDPDRILL_* left over from the test run."""
    return {
        "PATH": f"{DDPDRILL.parent}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        # Wide and plain, so rich neither wraps nor colours what the tests read.
        "COLUMNS": "200",
        "NO_COLOR": "1",
        "TERM": "dumb",
    }


@pytest.fixture(params=_databases())
def deployment(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Deployment]:
    home = tmp_path / "home"
    home.mkdir()
    env = _clean_env(home)
    env["DDPDRILL_BANK_DIR"] = str(FIXTURE_BANK)
    if request.param == "default":
        env["DDPDRILL_DATA_DIR"] = str(tmp_path / "data")
        yield Deployment("default", home, f"sqlite:///{tmp_path / 'data' / 'ddpdrill.db'}", env)
        return
    if request.param == "sqlite-url":
        url = f"sqlite:///{tmp_path / 'explicit' / 'drill.db'}"
        env["DDPDRILL_DATABASE_URL"] = url
        yield Deployment("sqlite-url", home, url, env)
        return
    with scratch_pg_schema("cli") as url:
        env["DDPDRILL_DATABASE_URL"] = url
        yield Deployment("postgresql", home, url, env)


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    assert "Traceback" not in result.stderr, result.stderr
    return result.stdout


def test_console_script_is_the_installed_one() -> None:
    assert DDPDRILL.is_file() and os.access(DDPDRILL, os.X_OK), f"not installed: {DDPDRILL}"


def test_an_engine_registers_every_model_whatever_was_imported_first(tmp_path: Path) -> None:
    # A fresh interpreter that imports one domain's models only, as a CLI command does.
    probe = (
        "from app.questions.models import QuestionRevision\n"
        "from app.db import Base, make_engine\n"
        f"make_engine('sqlite:///{tmp_path / 'probe.db'}').dispose()\n"
        "print(' '.join(sorted(Base.metadata.tables)))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=_clean_env(tmp_path),
                            capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False)
    from app.models import Base

    assert _ok(result).split() == sorted(Base.metadata.tables)
    assert "users" in result.stdout.split()


@pytest.mark.timeout(600)
def test_new_deployment_migrates_imports_exports_and_manages_accounts(
    deployment: Deployment, tmp_path: Path
) -> None:
    d = deployment
    assert "Database is at the latest revision." in _ok(d.run("db", "upgrade"))
    assert d.scalar("SELECT count(*) FROM questions") == 0

    assert "5 questions in 2 topics: all valid" in _ok(d.run("bank", "check"))

    # The command the issue reported crashing with NoReferencedTableError on a URL.
    imported = _ok(d.run("bank", "import", FIXTURE_BANK))
    assert "5 created, 0 updated, 0 unchanged, 0 retired, 0 restored" in imported
    assert d.scalar("SELECT count(*) FROM questions") == 5
    assert d.scalar("SELECT count(*) FROM topics") == 2

    exported_dir = tmp_path / "exported"
    assert "Wrote 5 questions in 2 topics" in _ok(d.run("bank", "export", exported_dir))
    files = sorted(str(p.relative_to(exported_dir)) for p in exported_dir.rglob("*") if p.is_file())
    assert "basics/fixture-single.yaml" in files and "basics/fixture_single.py" in files
    assert filecmp.cmp(exported_dir / "basics" / "fixture_single.py",
                       FIXTURE_BANK / "basics" / "fixture_single.py", shallow=False)
    revisions = d.scalar("SELECT count(*) FROM question_revisions")
    again = _ok(d.run("bank", "import", exported_dir))
    assert "0 created, 0 updated, 5 unchanged, 0 retired, 0 restored" in again
    assert d.scalar("SELECT count(*) FROM question_revisions") == revisions

    created = _ok(d.run("admin", "create", "ada", "--role", "admin", "--password-stdin",
                        stdin=PASSWORD + "\n"))
    assert "Created admin ada." in created
    assert d.scalar("SELECT role FROM users WHERE username = 'ada'") == "admin"
    assert d.scalar("SELECT count(*) FROM audit_log WHERE action = 'user.create'") == 1
    assert PASSWORD not in str(d.scalar("SELECT password_hash FROM users"))
    taken = d.run("admin", "create", "ada", "--password-stdin", stdin=PASSWORD + "\n")
    assert taken.returncode == 1
    assert "Not created" in taken.stderr and "taken" in taken.stderr
    assert d.scalar("SELECT count(*) FROM users") == 1

    listed = _ok(d.run("admin", "list"))
    assert listed.splitlines() == ["ada\tadmin\tactive"]

    audited = _ok(d.run("bank", "verify", "--slug", "fixture-single", "--json",
                        timeout=ENGINE_COMMAND_TIMEOUT_S))
    audits = json.loads(audited)
    assert [(a["slug"], a["passed"]) for a in audits] == [("fixture-single", True)]
    assert sorted(c["params"]["scale"] for c in audits[0]["combos"]) == [1, 2]
    assert {c["outcome"] for c in audits[0]["combos"]} == {"ok"}
    assert d.scalar("SELECT count(*) FROM runs WHERE status = 'done'") == 2
    # bank verify records its audit; the prefill's runs, when their last one finishes, may
    # record the same gate's verdict too (a worker of bank verify's can finish them), never
    # a failing one.
    assert d.scalar("SELECT count(*) FROM verdicts WHERE passed") >= 1
    assert d.scalar("SELECT count(*) FROM verdicts WHERE NOT passed") == 0

    if d.kind == "default":
        assert (tmp_path / "data" / "ddpdrill.db").is_file()
    else:  # an explicit URL is the only database; nothing lands in the default place
        assert not (d.home / "data" / "ddpdrill.db").exists()


@pytest.mark.timeout(600)
def test_verify_file_runs_a_snippet_on_real_ranks(deployment: Deployment) -> None:
    snippet = deployment.home / "allreduce.py"
    snippet.write_text(SNIPPET)
    result = deployment.run("verify", snippet, "--json", timeout=ENGINE_COMMAND_TIMEOUT_S)
    run = json.loads(_ok(result))
    assert run["outcome"] == "ok"
    assert [r["values"] for r in run["ranks"]] == [{"sum": 3.0}, {"sum": 3.0}]
    assert [r["stdout"] for r in run["ranks"]] == ["rank 0 done\n", "rank 1 done\n"]
    missing = deployment.run("verify", deployment.home / "nope.py")
    assert missing.returncode == 2
    assert "no such file" in missing.stderr


def _read_until(proc: subprocess.Popen[str], needle: str, seen: list[str]) -> None:
    """Collect the process's output lines until one contains needle (or it exits)."""
    assert proc.stdout is not None
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        if needle in line:
            return
    pytest.fail(f"{needle!r} never appeared; output so far:\n{''.join(seen)}")


def _stop(proc: subprocess.Popen[str], seen: list[str]) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        rest, _ = proc.communicate(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        rest, _ = proc.communicate()
        pytest.fail(f"did not stop within {STOP_TIMEOUT_S} s of SIGTERM:\n{''.join(seen)}{rest}")
    seen.append(rest)
    return proc.returncode


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.timeout(600)
def test_worker_and_serve_start_and_stop_cleanly_on_sigterm(deployment: Deployment) -> None:
    d = deployment
    if d.kind != "default":  # the default database migrates itself; a URL is migrated by the operator
        _ok(d.run("db", "upgrade"))

    seen: list[str] = []
    with d.start("worker", "--concurrency", "2") as worker:
        try:
            _read_until(worker, "2 worker(s) waiting for runs.", seen)
            assert _stop(worker, seen) == 0, "".join(seen)
        finally:
            if worker.poll() is None:
                worker.kill()
    output = "".join(seen)
    assert "finishing the runs in hand, then stopping" in output
    assert "Workers stopped." in output
    assert "Traceback" not in output

    port = _free_port()
    seen = []
    with d.start("serve", "--port", port) as server:
        try:
            # uvicorn listens only after the app's startup; this line says it does.
            _read_until(server, f"Uvicorn running on http://127.0.0.1:{port}", seen)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=30) as response:
                assert response.status == 200
                health = json.loads(response.read())
                assert health["status"] == "ok" and health["sandbox"] in ("on", "off")
            # An empty database gets the bank on start (DDPDRILL_BANK_DIR).
            assert d.scalar("SELECT count(*) FROM questions") == 5
            # uvicorn shuts down gracefully, then re-raises the SIGTERM it caught so that a
            # supervisor sees the process ended by the signal it sent: -15 is a clean stop.
            assert _stop(server, seen) in (0, -signal.SIGTERM), "".join(seen)
        finally:
            if server.poll() is None:
                server.kill()
    output = "".join(seen)
    assert "Application shutdown complete." in output
    assert "Traceback" not in output, output


def _open_connections(port: int, count: int) -> list[http.client.HTTPConnection]:
    """`count` keep-alive connections, opened together, each having had one answered request."""
    conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=30) for _ in range(count)]
    for conn in conns:
        conn.connect()
    for conn in conns:
        conn.request("GET", "/healthz")
        response = conn.getresponse()
        response.read()
        assert response.status == 200
    return conns


def _connection_owners(port: int, pids: set[int]) -> dict[int, int]:
    """How many established connections to `port` each of `pids` holds (read from /proc)."""
    inodes: dict[str, int] = {}
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            target = os.readlink(fd) if fd.is_symlink() else ""
            if target.startswith("socket:["):
                inodes[target[8:-1]] = pid
    owners: dict[int, int] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local_port, state, inode = int(fields[1].rsplit(":", 1)[1], 16), fields[3], fields[9]
            if local_port == port and state == "01" and inode in inodes:  # 01: ESTABLISHED
                owners[inodes[inode]] = owners.get(inodes[inode], 0) + 1
    return owners


def test_serve_processes_on_sqlite_is_refused_with_the_reason(deployment: Deployment) -> None:
    """One web process serves a class; several need PostgreSQL (docs/deploy.md)."""
    if deployment.kind == "postgresql":
        pytest.skip("PostgreSQL serves several processes: test_serve_processes_on_postgresql")
    refused = deployment.run("serve", "--port", str(_free_port()), "--processes", "2")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "--processes 2 needs PostgreSQL" in refused.stderr


@pytest.mark.timeout(600)
def test_serve_processes_on_postgresql(deployment: Deployment, tmp_path: Path) -> None:
    """`serve --processes 2` on PostgreSQL: uvicorn's own supervisor runs two identical web
    processes on the port; answers are stored once whichever process takes them, /metrics
    adds up every process, a killed process is replaced, and the workers (three per web
    process, the default) drain the queue, woken through PostgreSQL."""
    if deployment.kind != "postgresql":
        pytest.skip("several web processes need PostgreSQL")
    d = deployment
    _ok(d.run("db", "upgrade"))
    # The metrics folder is made under TMPDIR: here, so the test can see it go away.
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    d.env["TMPDIR"] = str(scratch)
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    seen: list[str] = []
    with d.start("serve", "--port", port, "--processes", "2") as server:
        try:
            _read_until(server, "(2 web processes)", seen)
            _read_until(server, "Application startup complete.", seen)
            _read_until(server, "Application startup complete.", seen)
            pids = {line.split("[")[1].split("]")[0] for line in seen
                    if "Started server process" in line}
            assert len(pids) == 2, "".join(seen)
            assert len(list(scratch.glob("ddpdrill-metrics-*"))) == 1

            def answer(count: int) -> None:
                for i in range(count):
                    request = urllib.request.Request(
                        f"{base}/api/v1/questions/fixture-single/attempts", method="POST",
                        data=json.dumps({"answer": "b"}).encode(),
                        headers={"Content-Type": "application/json"})
                    with urllib.request.urlopen(request, timeout=30) as response:
                        assert response.status == 200, i

            # Every answer, each on a new connection (whichever process takes it), is stored once.
            answer(30)
            assert d.scalar("SELECT count(*) FROM attempts") == 30

            # Whichever process answers a scrape, it reports every process's requests.
            route = 'route="/api/v1/questions/{slug}/attempts",status="200"} 30.0'
            for _ in range(6):
                with urllib.request.urlopen(f"{base}/metrics", timeout=30) as response:
                    body = response.read().decode()
                assert route in body, body
                # Three verify workers in each of the two processes (DDPDRILL_WORKERS' default).
                assert "ddpdrill_workers_in_process 6.0" in body

            # A web process killed outright is replaced, and the port keeps answering.
            os.kill(int(pids.pop()), signal.SIGKILL)
            _read_until(server, "Application startup complete.", seen)
            answer(5)
            assert d.scalar("SELECT count(*) FROM attempts") == 35

            # The runs the bank import queued are executed by the web processes' workers.
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline:
                pending = d.scalar("SELECT count(*) FROM runs WHERE status IN ('queued', 'running')")
                if pending == 0:
                    break
                time.sleep(0.5)
            assert pending == 0
            assert d.scalar("SELECT count(*) FROM runs WHERE status = 'done'") > 0
            assert _stop(server, seen) in (0, -signal.SIGTERM), "".join(seen)
        finally:
            if server.poll() is None:
                server.kill()
    output = "".join(seen)
    assert "Traceback" not in output, output
    assert not list(scratch.glob("ddpdrill-metrics-*"))


def test_a_configured_database_not_yet_migrated_is_named_with_what_to_run(
        deployment: Deployment) -> None:
    """An operator's database (an explicit URL) is upgraded by `ddpdrill db upgrade`; a command
    run before it says so instead of a traceback from the first missing table."""
    if deployment.kind == "default":
        pytest.skip("the embedded default migrates itself")
    for args in (("bank", "import"), ("bank", "verify", "--slug", "x"),
                 ("serve", "--port", _free_port())):
        refused = deployment.run(*args)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "Traceback" not in refused.stderr, refused.stderr
        assert "is not migrated (no schema yet" in refused.stderr
        assert "run `ddpdrill db upgrade` first" in refused.stderr
    _ok(deployment.run("db", "upgrade"))
    assert "audited runs" in _ok(deployment.run("bank", "import"))


def test_an_unreachable_database_is_named_without_its_password(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = _clean_env(home)
    env["DDPDRILL_DATABASE_URL"] = f"postgresql+psycopg://drill:hunter2@127.0.0.1:{_free_port()}/x"
    result = subprocess.run([str(DDPDRILL), "bank", "import"], cwd=home, env=env,
                            capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert "cannot reach the database at postgresql+psycopg://drill:***@127.0.0.1" in result.stderr
    assert "hunter2" not in result.stderr + result.stdout
