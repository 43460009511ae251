"""Escape attempts: each a snippet run through the real engine, each must fail, and the server live.

The server is the real app (uvicorn in a thread of this process, like the browser
tests' live server) on a data directory made the way the app makes it: an SQLite
database and a generated secret key, in a folder next to `app/` as the default
`./data` is. After every test the server still answers /healthz, the forkserver
has not restarted, and a normal DDP step still runs.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import socket
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.migrate import upgrade
from app.settings import Settings
from app.verify.engine import Engine, EngineFailure, RunResult, runner, sandbox
from tests.factories import FIXTURE_BANK, wait_for
from tests.servers import serve
from tests.verify.helpers import Run

ROOT = Path(__file__).resolve().parents[3]
DDP_STEP = """
import torch, torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
m = nn.Linear(2, 1, bias=False)
ddp = DDP(m)
ddp(torch.full((1, 2), float(rank + 1))).sum().backward()
report("grad", m.weight.grad)
"""
# A snippet reports what each attempt raised instead of failing on the first.
TRY = """
import errno, os, socket
def attempt(name, fn):
    try:
        report(name, ["ok", repr(fn())[:200]])
    except BaseException as exc:
        report(name, [type(exc).__name__, errno.errorcode.get(getattr(exc, "errno", None) or 0, "")])
"""


class App:
    def __init__(self, url: str, data_dir: Path, settings: Settings) -> None:
        self.url = url
        self.data_dir = data_dir
        self.settings = settings

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def healthz(self) -> dict[str, str]:
        with urllib.request.urlopen(self.url + "/healthz", timeout=10) as response:
            assert response.status == 200
            return dict(json.load(response))


@pytest.fixture(scope="module")
def app_server() -> Iterator[App]:
    data_dir = ROOT / f".sandbox-test-data-{uuid.uuid4().hex[:8]}"
    settings = Settings(data_dir=data_dir, bank_dir=FIXTURE_BANK, workers=0)
    settings.resolved_secret_key()  # written to data_dir/secret_key, as on a first start
    upgrade(settings.resolved_database_url)  # data_dir/ddpdrill.db
    assert (data_dir / "secret_key").is_file() and (data_dir / "ddpdrill.db").is_file()
    try:
        with serve(settings) as url:
            yield App(url, data_dir, settings)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture(autouse=True)
def stays_healthy(engine: Engine, run: Run, app_server: App) -> Iterator[None]:
    assert engine.sandboxed
    starts = engine.forkserver_starts
    yield
    assert app_server.healthz()["status"] == "ok"
    after = run(DDP_STEP)
    assert after.outcome == "ok", after.diagnosis
    assert [r.values["grad"] for r in after.ranks] == [[[1.5, 1.5]]] * 2
    assert engine.forkserver_starts == starts, "the forkserver had to restart"


def test_postgresql_and_the_app_port_on_loopback_are_unreachable(run: Run, app_server: App) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(0.5)
        result = run(TRY + """
attempt("postgres", lambda: socket.create_connection(("127.0.0.1", 5432), timeout=2))
attempt("app", lambda: socket.create_connection(("127.0.0.1", params["app"]), timeout=2))
attempt("listener", lambda: socket.create_connection(("127.0.0.1", params["listener"]), timeout=2))
attempt("app6", lambda: socket.create_connection(("::1", params["app"]), timeout=2))
""", params={"app": app_server.port, "listener": listener.getsockname()[1]}, world_size=1)
        with pytest.raises(TimeoutError):
            listener.accept()
    assert result.outcome == "ok", result.diagnosis
    values = result.ranks[0].values
    for name in ("postgres", "app", "listener"):
        assert values[name] == ["ConnectionRefusedError", "ECONNREFUSED"], name
    assert values["app6"][0] != "ok"


def _listening_on(pid: int, port: int) -> bool:
    """Whether a socket listens on 127.0.0.1:port in the network namespace of process pid."""
    try:
        table = Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return False
    # local address 0100007F:<port hex>, state 0A (LISTEN)
    return any(f"0100007F:{port:04X}" == row.split()[1] and row.split()[3] == "0A" for row in table)


def test_a_run_cannot_reach_a_port_another_run_listens_on(run: Run) -> None:
    listening: list[object] = []
    port = 29517
    first_run_uid = sandbox.HOST_UID_BASE + sandbox.RUN_UID_BASE

    def listen() -> None:
        # Listens until the test signals it (SIGUSR1), so the port is open for as long as
        # the other run needs, however slow the machine.
        listening.append(run("""
import signal, socket, time
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
server = socket.create_server(("127.0.0.1", params["port"]))
socket.create_connection(("127.0.0.1", params["port"]), timeout=2).close()  # reachable here
report("reachable", True)
signal.sigwait({signal.SIGUSR1})
report("until", time.time())
""", params={"port": port}, world_size=1, timeout_s=60))

    def listener() -> int | None:
        return next((p[0] for p in _host_processes()
                     if p[1] >= first_run_uid and _listening_on(p[0], port)), None)

    thread = threading.Thread(target=listen)
    thread.start()
    try:
        wait_for(lambda: listener() is not None, timeout=60)
        pid = listener()
        assert pid is not None
        other = run(TRY + """
import time
report("at", time.time())
attempt("other", lambda: socket.create_connection(("127.0.0.1", params["port"]), timeout=2))
""", params={"port": port}, world_size=1)
        assert _listening_on(pid, port)  # still open after the other run ended
    finally:
        for p in _host_processes():
            if p[1] >= first_run_uid and _listening_on(p[0], port):
                os.kill(p[0], signal.SIGUSR1)
        thread.join(timeout=60)
    assert other.ranks[0].values["other"] == ["ConnectionRefusedError", "ECONNREFUSED"]
    first = listening[0]
    assert isinstance(first, RunResult) and first.outcome == "ok", first
    assert first.ranks[0].values["reachable"] is True
    assert other.ranks[0].values["at"] < first.ranks[0].values["until"]


def _host_address() -> str:
    """A non-loopback address of this machine (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))
            return str(s.getsockname()[0])
        except OSError:
            return "10.0.0.1"


def test_only_loopback_exists_and_no_other_address_is_reachable(run: Run) -> None:
    result = run(TRY + """
report("interfaces", [name for _, name in socket.if_nameindex()])
attempt("public", lambda: socket.create_connection(("1.1.1.1", 80), timeout=2))
attempt("host", lambda: socket.create_connection((params["host"], params["port"]), timeout=2))
attempt("udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("8.8.8.8", 53)))
attempt("v6", lambda: socket.create_connection(("2606:4700:4700::1111", 80), timeout=2))
attempt("dns", lambda: socket.getaddrinfo("example.com", 80))
""", params={"host": _host_address(), "port": 22}, world_size=1)
    assert result.outcome == "ok", result.diagnosis
    values = result.ranks[0].values
    assert values["interfaces"] == ["lo"]
    for name in ("public", "host", "udp", "v6"):
        assert values[name] == ["OSError", "ENETUNREACH"], name
    assert values["dns"][0] == "gaierror"


def test_the_data_directory_database_and_secret_key_are_invisible(run: Run, app_server: App) -> None:
    key = (app_server.data_dir / "secret_key").read_text()
    result = run(TRY + """
for name, path in params.items():
    attempt(name, lambda: open(path, "rb").read())
attempt("listing", lambda: os.listdir(os.path.dirname(params["db"])))
""", params={"db": str(app_server.data_dir / "ddpdrill.db"),
             "key": str(app_server.data_dir / "secret_key"),
             "bank": str(FIXTURE_BANK / os.listdir(FIXTURE_BANK)[0]),
             "project": str(ROOT / "pyproject.toml")}, world_size=1)
    assert result.outcome == "ok", result.diagnosis
    values = result.ranks[0].values
    for name in ("db", "key", "bank", "project", "listing"):
        assert values[name] == ["FileNotFoundError", "ENOENT"], name
    assert key not in json.dumps(result.model_dump())


def test_the_servers_proc_entries_and_environment_are_invisible(run: Run, engine: Engine) -> None:
    me = os.getpid()
    result = run(TRY + """
attempt("environ", lambda: open(f"/proc/{params['server']}/environ", "rb").read())
attempt("forkserver", lambda: open(f"/proc/{params['forkserver']}/environ", "rb").read())
cmdlines = []
for name in os.listdir("/proc"):
    if name.isdigit():
        try:
            cmdlines.append(open(f"/proc/{name}/cmdline", "rb").read().decode(errors="replace"))
        except OSError:
            pass
report("cmdlines", cmdlines)
""", params={"server": me, "forkserver": engine.forkserver_pid}, world_size=1)
    assert result.outcome == "ok", result.diagnosis
    values = result.ranks[0].values
    # Only the sandbox's own processes are listed: pids are its own, small, numbers.
    assert me > 100 and values["environ"][0] in ("FileNotFoundError", "PermissionError")
    assert values["forkserver"][0] in ("FileNotFoundError", "PermissionError")
    assert all("pytest" not in c for c in values["cmdlines"])
    assert all("zygote" in c or "pytest" not in c for c in values["cmdlines"])


def test_nothing_outside_the_scratch_folder_is_writable(run: Run) -> None:
    targets = ["/escape", "/usr/escape", "/etc/escape", "/dev/escape",
               str(ROOT / "app" / "escape"), str(ROOT / "escape"),
               str(Path(os.__file__).parent / "escape")]
    result = run(TRY + """
for i, path in enumerate(params["targets"]):
    attempt(str(i), lambda: open(path, "w").write("x"))
attempt("scratch", lambda: open(os.path.join(os.getcwd(), "mine"), "w").write("x"))
attempt("cwd", os.getcwd)
""", params={"targets": targets}, world_size=1)
    assert result.outcome == "ok", result.diagnosis
    values = result.ranks[0].values
    for i, path in enumerate(targets):
        assert values[str(i)][0] in ("OSError", "PermissionError", "FileNotFoundError"), path
        assert values[str(i)][1] in ("EROFS", "EACCES", "ENOENT"), path
        assert not os.path.exists(path)
    assert values["scratch"] == ["ok", "1"]
    assert values["cwd"] == ["ok", "'/tmp'"]


def test_a_fork_bomb_stops_at_the_process_limit(run: Run) -> None:
    result = run("""
import os, time
forked = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        forked += 1
except OSError as exc:
    report("stopped", [forked, exc.errno])
""", processes=64, timeout_s=20)
    assert result.outcome == "ok", result.diagnosis
    # Both ranks share the run's 64 (their own threads included).
    forked = [r.values["stopped"][0] for r in result.ranks]
    assert all(r.values["stopped"][1] == errno.EAGAIN for r in result.ranks)
    assert sum(forked) < 64
    assert result.leftover_processes == sum(forked)


def test_a_fork_bomb_that_outruns_the_stop_is_a_verdict_on_the_code_not_a_retry(
    run: Run, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every process forks again as fast as it can. Killing them all takes the leader
    seconds (6.7 s for some 150 here, more on a loaded machine); past the stop's grace
    (shortened here so that it always passes) the engine kills the run's whole session and
    returns a verdict on the code, which a worker does not retry. Nothing is left behind:
    the next run works."""
    monkeypatch.setattr(runner, "STOP_GRACE_S", 0.5)
    result = run("""
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
""", timeout_s=3)
    assert result.outcome == "timeout", result.diagnosis
    assert "did not stop within 0.5 s" in result.diagnosis
    after = run("report('fine', rank)")
    assert after.outcome == "ok" and [r.values["fine"] for r in after.ranks] == [0, 1]


def test_filling_the_scratch_folder_stops_at_its_size(run: Run) -> None:
    result = run("""
import errno
written = 0
try:
    with open("fill", "wb") as f:
        while True:
            f.write(b"x" * 65536)
            f.flush()
            written += 65536
except OSError as exc:
    report("stopped", [written, errno.errorcode[exc.errno]])
""", world_size=1, scratch_bytes=2 * 2**20)
    assert result.outcome == "ok", result.diagnosis
    written, code = result.ranks[0].values["stopped"]
    assert code == "ENOSPC"
    assert written <= 2 * 2**20


def test_a_process_left_behind_is_killed_with_the_run(run: Run) -> None:
    result = run("""
import os, subprocess
# Its own session, orphaned at once: outside the rank's process group.
out = subprocess.run(["sh", "-c", "setsid sleep 300 >/dev/null 2>&1 & echo $!"],
                     capture_output=True, text=True, check=True)
report("pid", int(out.stdout))
report("uid", os.getuid())
""", world_size=1)
    assert result.outcome == "ok", result.diagnosis
    assert result.leftover_processes == 1
    uid = result.ranks[0].values["uid"]
    later = run("""
import os
found = []
for name in os.listdir("/proc"):
    if name.isdigit():
        try:
            found.append(int(open(f"/proc/{name}/status").read().split("Uid:")[1].split()[0]))
        except OSError:
            pass
report("uids", found)
""", world_size=1)
    assert uid not in later.ranks[0].values["uids"]


def _host_processes() -> list[tuple[int, int, int, str]]:
    """(pid, real uid, parent pid, command line) of every host process, as the host sees them."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            status = Path(f"/proc/{name}/status").read_text()
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        found.append((int(name), int(fields["Uid"].split()[0]), int(fields["PPid"].split()[0]),
                      cmdline.strip()))
    return found


def test_a_run_whose_leader_is_killed_leaves_nothing_behind(run: Run) -> None:
    # The leader normally kills the run's leftovers; if it dies first, the
    # forkserver kills every process of the run's uid.
    first_run_uid = sandbox.HOST_UID_BASE + sandbox.RUN_UID_BASE
    outcome: list[object] = []

    def go() -> None:
        try:
            outcome.append(run("""
import subprocess, time
subprocess.run(["sh", "-c", "setsid sleep 307 >/dev/null 2>&1 &"], check=True)
time.sleep(60)
""", world_size=1, timeout_s=30))
        except EngineFailure as exc:
            outcome.append(exc)

    thread = threading.Thread(target=go)
    thread.start()
    deadline = time.monotonic() + 20
    sleeper = None
    while sleeper is None and time.monotonic() < deadline:
        sleeper = next((p for p in _host_processes()
                        if p[3] == "sleep 307" and p[1] >= first_run_uid), None)
        time.sleep(0.05)
    assert sleeper is not None, "the snippet's orphan never appeared"
    uid = sleeper[1]
    ranks = [p for p in _host_processes() if p[1] == uid and p[0] != sleeper[0]]
    assert len(ranks) == 1
    os.kill(ranks[0][2], signal.SIGKILL)  # the rank's parent: the run's leader
    thread.join(timeout=30)
    assert len(outcome) == 1 and isinstance(outcome[0], EngineFailure)
    deadline = time.monotonic() + 10
    while [p for p in _host_processes() if p[1] == uid] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [p for p in _host_processes() if p[1] == uid] == []


def test_signals_reach_neither_the_server_nor_the_forkserver_nor_the_leader(
        run: Run, engine: Engine) -> None:
    me = os.getpid()
    result = run(TRY + """
attempt("server", lambda: os.kill(params["server"], params["sig"]))
attempt("forkserver", lambda: os.kill(1, params["sig"]))
attempt("leader", lambda: os.kill(os.getppid(), params["sig"]))
""", params={"server": me, "sig": int(signal.SIGKILL)}, world_size=1)
    assert result.outcome == "ok", result.diagnosis
    values = result.ranks[0].values
    assert values["server"][0] in ("ProcessLookupError", "PermissionError")
    assert values["forkserver"] == ["PermissionError", "EPERM"]
    assert values["leader"] == ["PermissionError", "EPERM"]
    assert engine.forkserver_pid is not None
    os.kill(engine.forkserver_pid, 0)  # still there


def test_kill_minus_one_only_reaches_the_runs_own_processes(run: Run) -> None:
    result = run("""
import os, signal, time
if rank == 0:
    time.sleep(0.5)
    report("sent", True)
    os.kill(-1, signal.SIGKILL)  # everything this uid may signal: its own run
time.sleep(5)
""", timeout_s=8)
    assert result.ranks[0].values == {"sent": True}
    assert result.ranks[1].signal == "SIGKILL"


def test_a_run_cannot_read_what_the_previous_run_wrote(run: Run) -> None:
    marker = uuid.uuid4().hex
    first = run("""
import os
for path in ("/tmp/marker", "/dev/shm/marker", os.path.expanduser("~/marker")):
    with open(path, "w") as f:
        f.write(params["marker"])
report("wrote", True)
""", params={"marker": marker}, world_size=1)
    assert first.ranks[0].values == {"wrote": True}, first.diagnosis
    second = run(TRY + """
for path in ("/tmp/marker", "/dev/shm/marker", os.path.expanduser("~/marker")):
    attempt(path, lambda: open(path).read())
report("listing", sorted(os.listdir("/tmp")))
""", world_size=1)
    values = second.ranks[0].values
    for path in ("/tmp/marker", "/dev/shm/marker"):
        assert values[path] == ["FileNotFoundError", "ENOENT"]
    assert "marker" not in values["listing"]
    assert marker not in json.dumps(second.model_dump())


def test_exhausting_memory_is_stopped_by_the_address_space_limit(run: Run) -> None:
    # Growing bit by bit, touching every page: the limit holds, not only for one huge request.
    result = run("""
chunks = []
while True:
    chunks.append(b"x" * (64 * 2**20))
""", world_size=1, memory_bytes=3 * 2**29, timeout_s=30)
    assert (result.outcome, result.limit) == ("error", "memory"), result.diagnosis


def test_ranks_hold_no_privilege(run: Run) -> None:
    result = run("""
import os, socket
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines())
report("uid", os.getuid())
report("caps", [status["CapEff"].strip(), status["CapPrm"].strip()])
report("nnp", status["NoNewPrivs"].strip())
report("hostname", socket.gethostname())
report("nproc", __import__("resource").getrlimit(__import__("resource").RLIMIT_NPROC))
""")
    assert result.outcome == "ok", result.diagnosis
    values = result.ranks[0].values
    assert values["uid"] != 0
    assert values["uid"] == result.ranks[1].values["uid"]
    assert values["caps"] == ["0000000000000000"] * 2
    assert values["nnp"] == "1"
    assert values["hostname"] == "ddpdrill-sandbox"
    assert values["nproc"] == [result.limits["processes"]] * 2


@pytest.mark.parametrize("world_size", range(2, 9))
def test_gloo_works_inside_for_every_world_size(run: Run, world_size: int) -> None:
    result = run("""
import torch, torch.distributed as dist
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
report("sum", t.item())
""", world_size=world_size, timeout_s=30)
    assert result.outcome == "ok", result.diagnosis
    expected = world_size * (world_size + 1) / 2
    assert [r.values["sum"] for r in result.ranks] == [expected] * world_size
