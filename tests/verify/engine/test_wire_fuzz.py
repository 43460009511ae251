"""The pipe protocol fuzzed from the learner's side: a driver given thousands of forged, garbled,
truncated and honest frames always ends the learner's part cleanly (a protocol error, an honest
end, or the end of the stream), never with an exception or a hang (fuzz_driver.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.verify.engine import wire

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("seed", [1, 2])
def test_a_driver_survives_every_frame_a_learner_process_can_write(seed: int) -> None:
    proc = subprocess.run([sys.executable, str(REPO / "tests/verify/engine/fuzz_driver.py"),
                           str(seed), "600"], cwd=REPO, capture_output=True, text=True,
                          timeout=600, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin",
                                            "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    endings = json.loads(proc.stdout.strip().splitlines()[-1])
    assert sum(endings.values()) == 600
    assert endings.get("protocol error", 0) > 300
    assert endings.get("ok", 0) + endings.get("exception", 0) > 10


def _read(data: bytes) -> tuple[int, dict, int] | None:
    import os

    r, w = os.pipe()
    os.write(w, data)
    os.close(w)
    try:
        return wire.read_frame(r, wire.FROM_LEARNER)
    finally:
        os.close(r)


def test_a_frame_is_refused_before_its_payload_is_read() -> None:
    with pytest.raises(wire.ProtocolError, match="payload"):
        _read(wire.PREFIX.pack(wire.MAGIC, wire.OP, 2, wire.MAX_PAYLOAD_BYTES + 1) + b"{}")
    with pytest.raises(wire.ProtocolError, match="protocol's mark"):
        _read(wire.PREFIX.pack(b"HTTP", wire.OP, 0, 0))
    with pytest.raises(wire.ProtocolError, match="unknown frame kind"):
        _read(wire.encode(wire.PROGRAM, {}))  # a driver's frame, not a learner's
    with pytest.raises(wire.ProtocolError, match="ended inside a frame"):
        _read(wire.encode(wire.REPORT, {"name": "x"})[:-3])
    assert _read(b"") is None
    assert _read(wire.encode(wire.END, {"ok": True})) == (wire.END, {"ok": True}, 0)
    for bad in (["float32", [-1]], ["complex32", [1]], ["float32", [1] * 17], "x", [1, 2, 3],
                ["float32", [2**20, 2**20]]):
        with pytest.raises(wire.ProtocolError):
            wire.tensor_spec(bad)
