"""Fuzz a driver from the learner's side (run by test_wire_fuzz.py in a process of its own).

A one-rank gloo group, and for each seeded case a fresh pipe pair: a writer thread plays
the learner and sends the case's bytes (frames forged from honest ones, random bytes,
truncated frames, headers of the wrong types and sizes), a reader thread drains what the
driver answers, and `Serve.serve()` must return an ending every time: an honest end, the end
of the stream, or a protocol error; never an exception, never a hang. Prints a JSON summary.

    python tests/verify/engine/fuzz_driver.py SEED CASES
"""

from __future__ import annotations

import itertools
import json
import os
import random
import sys
import tempfile
import threading
from collections import Counter
from typing import Any

import torch.distributed as dist

from app.verify.engine import driver, wire
from app.verify.engine.probes.sockets import GlooSockets

GROUP = "0"
HONEST: list[tuple[int, dict[str, Any], bytes]] = [
    (wire.OP, {"id": 1, "op": "allreduce", "group": GROUP, "in": [["float32", [4]]],
               "out": [["float32", [4]]], "line": 3, "reduce_op": "SUM"}, b"\0" * 16),
    (wire.OP, {"id": 2, "op": "broadcast", "group": GROUP, "in": [["int64", [2]]],
               "out": [["int64", [2]]], "line": None, "root": 0, "root_tensor": 0}, b"\1" * 16),
    (wire.OP, {"id": 3, "op": "all_gather_single", "group": GROUP, "in": [["float32", [3]]],
               "out": [["float32", [3]]], "line": 1}, b"\2" * 12),
    (wire.OP, {"id": 4, "op": "all_to_all_single", "group": GROUP, "in": [["float32", [2, 2]]],
               "out": [["float32", [2, 2]]], "line": 1, "in_splits": [2], "out_splits": [2]},
     b"\3" * 16),
    (wire.OP, {"id": 5, "op": "send", "group": GROUP, "in": [["float32", [1]]], "out": [],
               "line": 1, "peer": 0, "tag": 0}, b"\4" * 4),
    (wire.OP, {"id": 6, "op": "barrier", "group": GROUP, "in": [], "out": [], "line": 1}, b""),
    (wire.REPORT, {"name": "x", "value": [1, 2, {"a": 3}], "source": "checks"}, b""),
    (wire.MARK, {"id": 7, "name": "after"}, b""),
    (wire.NEW_GROUP, {"id": 8, "ranks": [0], "name": "1"}, b""),
    (wire.SECRET, {"id": 9, "key": "w", "shapes": [[4], [2, 2]]}, b""),
    (wire.SECRET, {"id": 10, "key": "f", "shapes": [[8], [3]], "flip_bit": 3, "on_ranks": [0],
                   "only": 1}, b""),
    (wire.END, {"ok": True}, b""),
    (wire.END, {"ok": False, "phase": "learner",
                "exception": {"type": "ValueError", "message": "m", "line": 2, "traceback": "t"}},
     b""),
]
WEIRD: list[Any] = [None, True, -1, 0, 2**63, 1.5, float("1e308"), "", "x" * 5000, [], {},
                    [[["deep"]]], {"a": {"b": {"c": 1}}}, ["float32", [-1]], ["float99", [1]],
                    ["float32", [2**40]], [["float32", [1]]] * 5000, "allreduce", "0"]


def _frame(kind: int, header: dict[str, Any], payload: bytes) -> bytes:
    return wire.encode(kind, header, len(payload)) + payload


def _forged(rng: random.Random) -> bytes:
    kind, header, payload = rng.choice(HONEST)
    header = dict(header)
    how = rng.randrange(9)
    if how == 0 and header:
        header[rng.choice(list(header))] = rng.choice(WEIRD)
    elif how == 1 and header:
        del header[rng.choice(list(header))]
    elif how == 2:
        header[rng.choice(["id", "op", "group", "in", "out", "extra"])] = rng.choice(WEIRD)
    elif how == 3:
        payload = payload[:rng.randrange(len(payload) + 1)] + os.urandom(rng.randrange(8))
    elif how == 4:
        kind = rng.randrange(256)
    elif how == 5:  # a header that claims a payload it does not send
        return wire.encode(kind, header, rng.choice([1, 1 << 20, wire.MAX_PAYLOAD_BYTES]))
    elif how == 6:  # truncated anywhere
        data = _frame(kind, header, payload)
        return data[:rng.randrange(len(data))]
    elif how == 7:  # not JSON, or JSON that is not an object
        body = rng.choice([b"{", b"[1, 2]", b"NaN", b"\xff\xfe", b'{"a": NaN}', b"1" * 5000])
        return wire.PREFIX.pack(wire.MAGIC, kind, len(body), 0) + body
    else:  # a lying prefix
        return wire.PREFIX.pack(rng.choice([wire.MAGIC, b"XXXX"]), kind,
                                rng.choice([0, 10, wire.MAX_HEADER_BYTES + 1]),
                                rng.choice([0, 2**40])) + os.urandom(rng.randrange(64))
    return _frame(kind, header, payload)


def _case(rng: random.Random) -> bytes:
    parts = []
    for _ in range(rng.randrange(1, 6)):
        pick = rng.random()
        if pick < 0.35:
            kind, header, payload = rng.choice(HONEST)
            parts.append(_frame(kind, header, payload))
        elif pick < 0.9:
            parts.append(_forged(rng))
        else:
            parts.append(os.urandom(rng.randrange(1, 200)))
    return b"".join(parts)


def _write(fd: int, data: bytes) -> None:
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except OSError:
        pass
    finally:
        os.close(fd)


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 1 << 16):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)


def main() -> None:
    seed, cases = int(sys.argv[1]), int(sys.argv[2])
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    world = driver._Group(dist.group.WORLD, [0])
    rng = random.Random(seed)
    endings: Counter[str] = Counter()
    seq = itertools.count(1)
    workdir = tempfile.mkdtemp()
    for _ in range(cases):
        data = _case(rng)
        from_r, from_w = os.pipe()
        to_r, to_w = os.pipe()
        writer = threading.Thread(target=_write, args=(from_w, data), daemon=True)
        reader = threading.Thread(target=_drain, args=(to_r,), daemon=True)
        writer.start()
        reader.start()
        learner = driver.Learner(os.getpid(), to_w, from_r, workdir, None)
        serve = driver.Serve(learner=learner, rank=0, world_size=1,
                             emit=lambda kind, **fields: None, sockets=GlooSockets(0),
                             forbidden=frozenset({"broadcast"}), seq=lambda: next(seq))
        serve.groups[GROUP] = world
        ending = serve.serve()
        serve.close()
        os.close(from_r)
        writer.join(10)
        reader.join(10)
        assert not writer.is_alive() and not reader.is_alive(), "a pipe was left hanging"
        endings["protocol error" if ending.protocol_error else "ok" if ending.ok
                else "exception" if ending.exception else "end of stream"] += 1
    print(json.dumps(dict(endings)))


if __name__ == "__main__":
    main()
