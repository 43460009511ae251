"""The events a rank may send, as schemas, and the check every line from a rank passes before use.

A rank's event channel is a pipe a snippet can reach (its fd is in the rank's own
process, and the harness's frames are a `sys._getframe().f_back` away), so a line on
it proves nothing about who wrote it. (In an exercise run only the driver holds it:
the learner's code runs in a process of its own, driver.py.) The runner parses each line with
`parse_event`: a line that is not one JSON object of a known kind, with exactly
the fields docs/run-result.md gives that kind and values of their types, is
rejected, and the runner makes that rank's result an error of the snippet. What
passes has the types that result assembly, the diagnosis and the pictures rely
on, so nothing downstream has to guess.

Field bounds are those a real rank can produce (a peer given by the snippet may
be any int; a sequence number is >= 1): a check stricter than the harness would
turn a snippet's odd but honest call into a "malformed event". Pure Python, no
torch: it runs in the engine's process.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from app.verify.engine.artifacts import Artifact

ARTIFACT: TypeAdapter[Any] = TypeAdapter(Artifact)

# Integers a rank sends fit in 64 bits (nanosecond clocks, byte counts); a larger
# one would overflow the float conversions that turn times into milliseconds.
_I64 = 2**63 - 1
Int = Annotated[int, Field(ge=-_I64, le=_I64)]
Count = Annotated[int, Field(ge=0, le=_I64)]
Seq = Annotated[int, Field(ge=1, le=_I64)]
Line = Annotated[int, Field(ge=0, le=_I64)] | None
Iteration = Annotated[int, Field(ge=0, le=_I64)] | None
Source = Literal["snippet", "torch", "learner"]
# report() values: the harness nests at most 32 levels (harness.jsonable); a few
# more for the wrapping lists of complex numbers.
MAX_VALUE_DEPTH = 40
# The error detail quotes at most this much of what the rank sent.
_DETAIL_CHARS = 300

# The type name a rejected line gives the rank's `error` (not a Python exception of the snippet).
MALFORMED_EVENT_TYPE = "MalformedEvent"


class MalformedEvent(ValueError):
    """A line from a rank that is not a well-formed event; str() says what is wrong."""


class _Event(BaseModel):
    # strict: "5" is not 5 and 1 is not True, so a valid event is exactly what
    # the harness would have written, and the raw dict can be kept as it is.
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    t: Count


class Started(_Event):
    kind: Literal["started"]
    pid: Count


class GroupReady(_Event):
    kind: Literal["group_ready"]


class SnippetStart(_Event):
    kind: Literal["snippet_start"]
    # True on an exercise run: the learner's code, then the checks apart.
    checks: bool | None = None


class ChecksDone(_Event):
    kind: Literal["checks_done"]


class SnippetEnd(_Event):
    kind: Literal["snippet_end"]
    sent_total: Count


class EventsTruncated(_Event):
    kind: Literal["events_truncated"]


class SetupError(_Event):
    kind: Literal["setup_error"]
    type: str
    message: str
    line: Line
    traceback: str


class ExceptionEvent(_Event):
    kind: Literal["exception"]
    type: str
    message: str
    line: Line
    traceback: str
    sent_total: Count
    exit_code: Int | None = None
    # In an exercise run: whose code raised ("learner" or "checks"), or the reference solution
    # run by the driver ("reference": an author's problem).
    phase: Literal["learner", "checks", "reference"] | None = None


def _too_deep(value: Any, room: int) -> bool:
    """Whether a JSON value nests lists and dicts more than `room` levels deep."""
    if isinstance(value, dict):
        items: Any = value.values()
    elif isinstance(value, list):
        items = value
    else:
        return False
    return room == 0 or any(_too_deep(item, room - 1) for item in items)


class Report(_Event):
    kind: Literal["report"]
    name: Annotated[str, Field(min_length=1)]
    value: Any
    iteration: Iteration
    # In an exercise run: the learner's code ("learner", no check reads it), the checks program
    # in the learner process ("checks") or in the driver, on the reference ("reference").
    source: Literal["learner", "checks", "reference"] | None = None

    @field_validator("value")
    @classmethod
    def _shallow(cls, value: Any) -> Any:
        if _too_deep(value, MAX_VALUE_DEPTH):
            raise ValueError(f"nested deeper than {MAX_VALUE_DEPTH} levels")
        return value


class ArtifactEvent(_Event):
    kind: Literal["artifact"]
    name: Annotated[str, Field(min_length=1, max_length=200)]
    # One of the shapes of app.verify.engine.artifacts, checked against them whole.
    artifact: dict[str, Any]

    @field_validator("artifact")
    @classmethod
    def _shape(cls, value: dict[str, Any]) -> dict[str, Any]:
        ARTIFACT.validate_python(value)
        return value


class MemoryMarkEvent(_Event):
    kind: Literal["memory_mark"]
    name: Annotated[str, Field(min_length=1)]
    bytes: Count
    ops: Count
    source: Literal["learner", "reference"]


class LearnerEnd(_Event):
    kind: Literal["learner_end"]
    exit_code: Int | None
    confined: bool
    peak_bytes: Count | None
    files: Count | None
    sent_total: Count


class ReferenceEnd(_Event):
    kind: Literal["reference_end"]
    bytes_sent: Count
    ok: bool


class ProtocolErrorEvent(_Event):
    kind: Literal["protocol_error"]
    detail: str


class Note(_Event):
    kind: Literal["note"]
    # The DDP model it is about; none for a note of the exercise harness.
    ddp: Count | None = None
    text: str


class CollectiveStart(_Event):
    kind: Literal["collective_start"]
    op: str
    seq: Seq
    iteration: Iteration
    group_size: Count | None
    shape: list[Count] | None
    dtype: str | None
    bytes: Count | None
    source: Source
    line: Line
    caller: str | None = None
    count: Count | None = None
    peer: Int | None = None
    reduce_op: str | None = None
    async_: bool | None = Field(None, alias="async")
    api: str | None = None
    unit: str | None = None
    group_ranks: list[Count] | None = None


class CollectiveEnd(_Event):
    kind: Literal["collective_end"]
    op: str
    seq: Seq
    bytes_sent: Count
    sent_total: Count
    error: str | None = None
    enqueued_only: bool | None = None


class DdpInit(_Event):
    kind: Literal["ddp_init"]
    ddp: Count
    params: Count
    bucket_cap_mb: float
    find_unused_parameters: bool
    gradient_as_bucket_view: bool
    static_graph: bool


class DdpForwardStart(_Event):
    kind: Literal["ddp_forward_start"]
    ddp: Count
    iteration: Count
    sync: bool
    grad: bool


class DdpForwardEnd(_Event):
    kind: Literal["ddp_forward_end"]
    ddp: Count
    iteration: Count
    error: str | None = None


class GradReady(_Event):
    kind: Literal["grad_ready"]
    ddp: Count
    param: str
    iteration: Count


class DdpBackwardEnd(_Event):
    kind: Literal["ddp_backward_end"]
    ddp: Count
    iteration: Count
    sync: bool


class BucketReduceStart(_Event):
    kind: Literal["bucket_reduce_start"]
    seq: Seq
    ddp: Count
    index: Count
    iteration: Count
    params: list[str]
    bytes: Count
    shadow: bool
    hook: str
    group_size: Count
    source: Source
    line: Line
    caller: str | None = None


class BucketReduceEnd(_Event):
    kind: Literal["bucket_reduce_end"]
    seq: Seq
    ddp: Count
    bytes_sent: Count
    sent_total: Count
    error: str | None


class JoinStart(_Event):
    kind: Literal["join_start"]
    iteration: Iteration


class JoinEnd(_Event):
    kind: Literal["join_end"]
    iteration: Iteration
    error: str | None = None


class StageForwardStart(_Event):
    kind: Literal["stage_forward_start"]
    seq: Seq
    stage: Count
    microbatch: Count
    iteration: Iteration


class StageForwardEnd(_Event):
    kind: Literal["stage_forward_end"]
    seq: Seq
    stage: Count
    microbatch: Count
    error: str | None = None


class StageBackwardStart(_Event):
    kind: Literal["stage_backward_start"]
    seq: Seq
    stage: Count
    microbatch: Count
    part: Literal["full", "input", "weight"]
    iteration: Iteration


class StageBackwardEnd(_Event):
    kind: Literal["stage_backward_end"]
    seq: Seq
    stage: Count
    microbatch: Count
    error: str | None = None


# Every kind a rank may send, by name. The engine adds kinds of its own
# (`exit`, `events_dropped`, `malformed_event`) after this check, never before it.
SCHEMAS: dict[str, type[_Event]] = {
    get_args(model.model_fields["kind"].annotation)[0]: model
    for model in (
        Started, GroupReady, SnippetStart, ChecksDone, SnippetEnd, EventsTruncated,
        SetupError, ExceptionEvent, MemoryMarkEvent, LearnerEnd, ReferenceEnd, ProtocolErrorEvent,
        Report, ArtifactEvent, Note, CollectiveStart, CollectiveEnd, DdpInit, DdpForwardStart, DdpForwardEnd,
        GradReady, DdpBackwardEnd, BucketReduceStart, BucketReduceEnd, JoinStart, JoinEnd,
        StageForwardStart, StageForwardEnd, StageBackwardStart, StageBackwardEnd,
    )
}


def _no_constant(name: str) -> Any:
    # The harness never writes NaN or Infinity (report() turns them into strings).
    raise MalformedEvent(f"{name} is not a JSON number")


def _quote(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# One decoder for every line (json.loads with an option builds a new one per call).
_DECODER = json.JSONDecoder(parse_constant=_no_constant)


def parse_event(line: bytes) -> dict[str, Any]:
    """The event on one line from a rank (as sent); MalformedEvent saying what is wrong otherwise."""
    try:
        event = _DECODER.decode(line.decode())
    except MalformedEvent:
        raise
    except RecursionError:
        raise MalformedEvent("the line is JSON nested too deeply to read") from None
    except ValueError as exc:  # not UTF-8, not JSON, an integer of thousands of digits
        raise MalformedEvent(f"the line is not JSON ({str(exc)[:120]}): "
                             f"{_quote(line[:80])}") from None
    if not isinstance(event, dict):
        raise MalformedEvent(f"the line is JSON but not an object: {_quote(event)}")
    kind = event.get("kind")
    if not isinstance(kind, str):
        raise MalformedEvent(f"the event has no string 'kind': {_quote(kind)}")
    model = SCHEMAS.get(kind)
    if model is None:
        raise MalformedEvent(f"unknown event kind {_quote(kind)}")
    try:
        model.model_validate(event)
    except ValidationError as exc:
        # A wrong value says more about a forgery than the fields it left out.
        errors = sorted(exc.errors(include_url=False), key=lambda e: e["type"] == "missing")
        first = errors[0]
        where = ".".join(str(p) for p in first["loc"]) or "(the event)"
        more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
        given = "" if first["type"] == "missing" else f", got {_quote(first.get('input'))}"
        raise MalformedEvent(f"{kind}, field {where!r}: {first['msg']}{given}{more}"[:_DETAIL_CHARS]) \
            from None
    except RecursionError:
        raise MalformedEvent(f"{kind}: a value is nested too deeply") from None
    return event
