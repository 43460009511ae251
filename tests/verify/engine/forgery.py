"""What an attacker can write on a rank's event channel: forged events, mutated fields, junk.

Shared by the pure validator test and the test on real gloo ranks. EXAMPLES are
events as the harness writes them (one per kind); the generators turn them into
lines that must be rejected, and into random lines that may or may not be.
"""

from __future__ import annotations

import json
import math
import random
from typing import Any

from app.verify.engine.events import SCHEMAS

# One event of every kind a rank sends, shaped as the harness writes it.
EXAMPLES: dict[str, dict[str, Any]] = {
    "started": {"pid": 7},
    "group_ready": {},
    "snippet_start": {},
    "checks_done": {},
    "memory_mark": {"name": "after_step", "bytes": 4194304, "ops": 2, "source": "learner"},
    "learner_end": {"exit_code": None, "confined": True, "peak_bytes": 8388608, "files": None,
                    "sent_total": 600},
    "reference_end": {"bytes_sent": 600, "ok": True},
    "protocol_error": {"detail": "a frame does not start with the protocol's mark"},
    "snippet_end": {"sent_total": 832},
    "events_truncated": {},
    "setup_error": {"type": "RuntimeError", "message": "no", "line": None, "traceback": "tb"},
    "exception": {"type": "ValueError", "message": "boom", "line": 3, "traceback": "tb",
                  "sent_total": 0},
    "report": {"name": "grad", "value": [[1.5, 1.5]], "iteration": 1},
    "artifact": {"name": "memory", "artifact": {
        "kind": "memory", "moment": "after forward", "rows": [
            {"category": "saved for backward", "name": "linear: [4, 8]", "shape": [4, 8],
             "dtype": "float32", "bytes": 128, "new_bytes": 0, "note": "a parameter"}]}},
    "note": {"ddp": 0, "text": "a built-in C++ comm hook is registered: no bucket timings"},
    "collective_start": {"op": "all_reduce", "seq": 1, "iteration": None, "group_size": 2,
                         "shape": [4], "dtype": "float32", "bytes": 16, "source": "torch",
                         "line": 4, "reduce_op": "SUM", "caller": "redistribute_local_tensor",
                         "api": "c10d.allreduce_", "unit": "0", "group_ranks": [0, 1], "async": True,
                         "count": 1, "peer": 0},
    "collective_end": {"op": "all_reduce", "seq": 1, "bytes_sent": 120, "sent_total": 500},
    "ddp_init": {"ddp": 0, "params": 1, "bucket_cap_mb": 25.0, "find_unused_parameters": False,
                 "gradient_as_bucket_view": False, "static_graph": False},
    "ddp_forward_start": {"ddp": 0, "iteration": 1, "sync": True, "grad": True},
    "ddp_forward_end": {"ddp": 0, "iteration": 1},
    "grad_ready": {"ddp": 0, "param": "weight", "iteration": 1},
    "ddp_backward_end": {"ddp": 0, "iteration": 1, "sync": True},
    "bucket_reduce_start": {"seq": 3, "ddp": 0, "index": 0, "iteration": 1, "params": ["weight"],
                            "bytes": 8, "shadow": False, "hook": "built-in allreduce",
                            "group_size": 2, "source": "torch", "line": 6,
                            "caller": "_engine_run_backward"},
    "bucket_reduce_end": {"seq": 3, "ddp": 0, "bytes_sent": 296, "sent_total": 832, "error": None},
    "stage_forward_start": {"seq": 9, "stage": 0, "microbatch": 3, "iteration": None},
    "stage_forward_end": {"seq": 9, "stage": 0, "microbatch": 3},
    "stage_backward_start": {"seq": 10, "stage": 1, "microbatch": 0, "part": "full", "iteration": None},
    "stage_backward_end": {"seq": 10, "stage": 1, "microbatch": 0, "error": "RuntimeError: no"},
    "join_start": {"iteration": 2},
    "join_end": {"iteration": 2},
}

# A dict is a value no field takes (report's `value` aside, which is checked for depth).
NEVER_VALID: Any = {"forged": {"deep": [1, 2, 3]}}
def _nest(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


# Deeper than any report() value can be (the harness stops at 32 levels).
TOO_DEEP: Any = _nest(50)
ODD_VALUES: list[Any] = [
    None, True, False, 0, 1, -1, 2**63, -(2**63) - 1, 10**30, 1.5, -0.0, 1e308, "", "x", "5",
    [], [1], ["a"], [None], {}, {"a": 1}, [[[[[]]]]], "\u202e\u0000", 2**62,
]


def _required(kind: str) -> set[str]:
    return {field.alias or name for name, field in SCHEMAS[kind].model_fields.items() if field.is_required()}


def line(kind: str, fields: dict[str, Any], t: int = 10**9) -> bytes:
    """One event line as the harness's emitter writes it."""
    return (json.dumps({**fields, "kind": kind, "t": t}, separators=(",", ":")) + "\n").encode()


def rejected_lines(kind: str) -> list[tuple[str, bytes]]:
    """(what was done, line) for forgeries of `kind` that no schema may accept."""
    base = EXAMPLES[kind]
    out: list[tuple[str, bytes]] = []
    for name in base:
        bad = TOO_DEEP if name == "value" else NEVER_VALID
        out.append((f"{name} set to a {type(bad).__name__}", line(kind, {**base, name: bad})))
        if name != "value":
            rest = {k: v for k, v in base.items() if k != name}
            if name in _required(kind):
                out.append((f"{name} left out", line(kind, rest)))
    out.append(("an extra field", line(kind, {**base, "forged": 1})))
    out.append(("a string time", line(kind, base, t="1")))  # type: ignore[arg-type]
    out.append(("a negative time", line(kind, base, t=-5)))
    out.append(("a huge time", line(kind, base, t=10**40)))
    for name, value in base.items():
        if isinstance(value, bool):
            out.append((f"{name} as 1", line(kind, {**base, name: 1})))
        elif isinstance(value, int):
            out.append((f"{name} huge", line(kind, {**base, name: 2**64})))
            out.append((f"{name} a float", line(kind, {**base, name: float(value) + 0.5})))
            out.append((f"{name} a string", line(kind, {**base, name: str(value)})))
        elif isinstance(value, float):
            out.append((f"{name} NaN", line(kind, {**base}).replace(
                json.dumps(value).encode(), b"NaN", 1)))
            out.append((f"{name} Infinity", line(kind, {**base}).replace(
                json.dumps(value).encode(), b"Infinity", 1)))
        elif isinstance(value, str) or (isinstance(value, list) and name != "value"):
            # (a report's value may be anything shallow)
            out.append((f"{name} a number", line(kind, {**base, name: 5})))
    if "seq" in base:
        out.append(("negative seq", line(kind, {**base, "seq": -1})))
        out.append(("zero seq", line(kind, {**base, "seq": 0})))
    out.append(("kind in another case", line(kind.upper(), base)))
    return out


def junk_lines() -> list[tuple[str, bytes]]:
    """Lines that are not events at all."""
    return [
        ("an empty line", b"\n"),
        ("not JSON", b"hello\n"),
        ("not UTF-8", b"\xff\xfe{\"kind\"\n"),
        ("a JSON list", b"[1, 2]\n"),
        ("a JSON string", b"\"started\"\n"),
        ("a JSON number", b"12\n"),
        ("null", b"null\n"),
        ("no kind", b"{\"t\": 1}\n"),
        ("a numeric kind", b"{\"kind\": 5, \"t\": 1}\n"),
        ("an unknown kind", line("ddpdrill_pwned", {})),
        ("an engine-only kind", line("exit", {"exit_code": 0, "signal": None, "killed_by": None})),
        ("another engine-only kind", line("malformed_event", {"detail": "x"})),
        ("NaN time", b"{\"kind\": \"group_ready\", \"t\": NaN}\n"),
        ("a 5000-digit number", b"{\"kind\": \"started\", \"t\": 1, \"pid\": " + b"9" * 5000 + b"}\n"),
        ("nested 100000 deep", b"[" * 100_000 + b"]" * 100_000 + b"\n"),
        ("a report nested too deep", line("report", {"name": "x", "value": TOO_DEEP, "iteration": None})),
        ("an object nested 100000 deep",
         b"{\"kind\": \"report\", \"t\": 1, \"name\": \"x\", \"iteration\": null, \"value\": "
         + b"{\"a\": " * 100_000 + b"1" + b"}" * 100_001 + b"\n"),
    ]


def random_value(rng: random.Random, depth: int = 0) -> Any:
    """A random JSON-ish value (NaN and huge numbers included)."""
    roll = rng.random()
    if depth > 3 or roll < 0.5:
        return rng.choice([*ODD_VALUES, rng.randint(-(2**70), 2**70), rng.random() * 10**rng.randint(0, 300),
                           math.nan, math.inf, rng.choice(list(EXAMPLES)), "".join(
                               chr(rng.randint(0, 0x2FFF)) for _ in range(rng.randint(0, 8)))])
    if roll < 0.75:
        return [random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {rng.choice(["kind", "t", "seq", "op", "x", ""]): random_value(rng, depth + 1)
            for _ in range(rng.randint(0, 4))}


def random_lines(rng: random.Random, n: int) -> list[bytes]:
    """`n` lines: random bytes, random JSON, and examples with random fields swapped in."""
    out = []
    for _ in range(n):
        roll = rng.random()
        if roll < 0.2:
            junk = bytes(rng.randrange(256) for _ in range(rng.randint(0, 40)))
            out.append(junk.replace(b"\n", b"") + b"\n")
        elif roll < 0.4:
            out.append((json.dumps(random_value(rng)) + "\n").encode())
        else:
            kind = rng.choice(list(EXAMPLES))
            fields = dict(EXAMPLES[kind])
            for _ in range(rng.randint(1, 3)):
                name = rng.choice([*fields, "seq", "kind", "t", "extra"]) if fields else "t"
                fields[name] = random_value(rng)
            if rng.random() < 0.3 and fields:
                fields.pop(rng.choice(list(fields)))
            t = fields.pop("t", rng.choice([1, 10**9, -1, 2**63 - 1]))
            kind = fields.pop("kind", kind)
            out.append((json.dumps({**fields, "kind": kind, "t": t}) + "\n").encode())
    return out
