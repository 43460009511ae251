"""The frames a learner process and its driver exchange (docs/exercises.md, "How a run executes").

A frame is a 20-byte prefix (a magic number, the frame's kind, the length of its
header and of its payload), a JSON object (the header) and raw bytes (the payload:
tensors' contents, one after another, in the order the header lists them). The
reader checks the prefix and the header before it reads a byte of the payload, so
a frame that claims gigabytes costs nothing to refuse.

The driver believes nothing a learner's frame says: `read_frame` refuses what is
not a frame (`ProtocolError`), and the driver checks every field it uses (`Tensor`
specs here, the rest in driver.py). No torch here: the fuzz tests and the engine
can use it without importing torch.
"""

from __future__ import annotations

import json
import math
import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

PREFIX = struct.Struct("<4sB3xIQ")
MAGIC = b"DDPw"

# Learner -> driver.
READY = 1        # the learner process is confined and waits for its program
OP = 2           # start a collective; the payload holds the inputs
NEW_GROUP = 3    # torch.distributed.new_group was called
REPORT = 4       # report(name, value)
MARK = 5         # the checks ask for a memory measurement now
END = 6          # the program ended (normally, or with its exception)
SECRET = 7       # the checks ask for the run's secret tensors (answered like an OP: ACK, DONE)
# Driver -> learner.
PROGRAM = 20     # what to run
ACK = 21         # an OP started (or was refused)
DONE = 22        # an OP completed (or failed); the payload holds the outputs
GROUP = 23       # a NEW_GROUP exists (or not)
MARKED = 24      # a MARK was taken
FROM_LEARNER = frozenset({READY, OP, NEW_GROUP, REPORT, MARK, END, SECRET})
FROM_DRIVER = frozenset({PROGRAM, ACK, DONE, GROUP, MARKED})

# A header is metadata and at most one reported value (1 MiB as JSON, harness.MAX_VALUE_BYTES).
MAX_HEADER_BYTES = 2 * 2**20
# One frame's tensors together (an exercise moves megabytes): a frame that claims more is
# refused before the driver allocates anything for it.
MAX_PAYLOAD_BYTES = 2**29
MAX_TENSORS = 4096
MAX_DIMS = 16
# The dtypes a collective may carry, with their sizes in bytes.
DTYPES: dict[str, int] = {
    "float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "complex64": 8, "complex128": 16,
    "int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint8": 1, "bool": 1,
}
_CHUNK = 1 << 20


class ProtocolError(Exception):
    """A frame that breaks the protocol; str() says how, in words a learner can read."""


@dataclass(frozen=True)
class Tensor:
    """The dtype and shape of one tensor of a frame."""

    dtype: str
    shape: tuple[int, ...]

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * DTYPES[self.dtype]

    def to_json(self) -> list[Any]:
        return [self.dtype, list(self.shape)]


def buffer(t: Any) -> memoryview:
    """A contiguous torch tensor's bytes, without a copy (numpy's view of them)."""
    return memoryview(t.reshape(-1).view(_torch_uint8()).numpy())


def _torch_uint8() -> Any:
    import torch

    return torch.uint8


def tensor_spec(value: Any, what: str = "a tensor") -> Tensor:
    """A header's [dtype, shape] as a Tensor; ProtocolError if it is not one."""
    if not (isinstance(value, list) and len(value) == 2):
        raise ProtocolError(f"{what} is not [dtype, shape]")
    dtype, shape = value
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise ProtocolError(f"{what} has an unknown dtype {str(dtype)[:40]!r}")
    if not isinstance(shape, list) or len(shape) > MAX_DIMS:
        raise ProtocolError(f"{what} has no shape of at most {MAX_DIMS} dimensions")
    if not all(_is_int(d) and 0 <= d < 2**40 for d in shape):
        raise ProtocolError(f"{what} has a shape that is not a list of sizes")
    spec = Tensor(dtype, tuple(shape))
    if spec.nbytes > MAX_PAYLOAD_BYTES:
        raise ProtocolError(f"{what} is larger than {MAX_PAYLOAD_BYTES} bytes")
    return spec


def tensor_specs(value: Any, what: str) -> list[Tensor]:
    """A header's list of [dtype, shape]; ProtocolError if it is not one."""
    if not isinstance(value, list) or len(value) > MAX_TENSORS:
        raise ProtocolError(f"{what} is not a list of at most {MAX_TENSORS} tensors")
    return [tensor_spec(v, f"{what}[{i}]") for i, v in enumerate(value)]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def integer(header: dict[str, Any], key: str, lo: int, hi: int) -> int:
    """header[key], an int in [lo, hi]; ProtocolError otherwise."""
    value = header.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise ProtocolError(f"{key!r} is not an integer from {lo} to {hi}")
    return value


def text(header: dict[str, Any], key: str, limit: int = 200) -> str:
    """header[key], a non-empty string of at most `limit` characters; ProtocolError otherwise."""
    value = header.get(key)
    if not isinstance(value, str) or not 0 < len(value) <= limit:
        raise ProtocolError(f"{key!r} is not a string of 1 to {limit} characters")
    return value


def _no_constant(name: str) -> Any:
    raise ProtocolError(f"{name} is not a JSON number")


_DECODER = json.JSONDecoder(parse_constant=_no_constant)
_ENCODE = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode


def encode(kind: int, header: dict[str, Any], payload_bytes: int = 0) -> bytes:
    """The prefix and header of a frame whose payload (sent after it) has `payload_bytes`."""
    body = _ENCODE(header).encode()
    return PREFIX.pack(MAGIC, kind, len(body), payload_bytes) + body


def send(fd: int, kind: int, header: dict[str, Any], payload: Sequence[memoryview] = ()) -> None:
    """Write one whole frame to `fd` (blocking)."""
    size = sum(p.nbytes for p in payload)
    parts: list[memoryview] = [memoryview(encode(kind, header, size)), *payload]
    for part in parts:
        part = part.cast("B") if part.ndim != 1 or part.format != "B" else part
        while part.nbytes:
            n = os.write(fd, part[:_CHUNK])
            part = part[n:]


def read_exact(fd: int, n: int) -> bytes | None:
    """Exactly n bytes from `fd`; None at end of file before the first; ProtocolError after."""
    chunks = []
    got = 0
    while got < n:
        chunk = os.read(fd, min(n - got, _CHUNK))
        if not chunk:
            if got == 0:
                return None
            raise ProtocolError(f"the stream ended inside a frame ({got} of {n} bytes)")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_into(fd: int, view: memoryview) -> None:
    """Fill `view` (bytes) from `fd`; ProtocolError if the stream ends first."""
    view = view.cast("B") if view.ndim != 1 or view.format != "B" else view
    while view.nbytes:
        n = os.readv(fd, [view[:_CHUNK]])
        if n == 0:
            raise ProtocolError("the stream ended inside a frame's payload")
        view = view[n:]


def skip(fd: int, n: int) -> None:
    """Read and drop n bytes (a payload nobody needs)."""
    while n:
        chunk = os.read(fd, min(n, _CHUNK))
        if not chunk:
            raise ProtocolError("the stream ended inside a frame's payload")
        n -= len(chunk)


def read_frame(fd: int, kinds: frozenset[int]) -> tuple[int, dict[str, Any], int] | None:
    """The next frame's (kind, header, payload length), its payload still unread; None at the
    end of the stream. ProtocolError for anything that is not a frame of one of `kinds`."""
    prefix = read_exact(fd, PREFIX.size)
    if prefix is None:
        return None
    magic, kind, header_len, payload_len = PREFIX.unpack(prefix)
    if magic != MAGIC:
        raise ProtocolError(f"a frame does not start with the protocol's mark (got {magic!r})")
    if kind not in kinds:
        raise ProtocolError(f"unknown frame kind {kind}")
    if header_len > MAX_HEADER_BYTES:
        raise ProtocolError(f"a header of {header_len} bytes (at most {MAX_HEADER_BYTES})")
    if payload_len > MAX_PAYLOAD_BYTES:
        raise ProtocolError(f"a payload of {payload_len} bytes (at most {MAX_PAYLOAD_BYTES})")
    body = read_exact(fd, header_len) if header_len else b""
    if body is None:
        raise ProtocolError("the stream ended before a frame's header")
    try:
        header = _DECODER.decode(body.decode())
    except ProtocolError:
        raise
    except RecursionError:
        raise ProtocolError("a header nested too deeply to read") from None
    except ValueError as exc:
        raise ProtocolError(f"a header that is not JSON ({str(exc)[:80]})") from None
    if not isinstance(header, dict):
        raise ProtocolError("a header that is not a JSON object")
    return kind, header, payload_len
