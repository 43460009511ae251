"""The exercise contract inside a rank: where the checks program starts, and what learner code may call.

An exercise run is one text: the learner's code (or the reference solution, the
starter, a known-wrong solution), then CHECKS_MARK, one line of options, and the
exercise's checks program. The app composes it (`compose`), so it is part of the
run's cache key; the rank splits it at the LAST mark (`split`), so a mark inside
learner code stays learner code. The harness runs the two parts in separate
namespaces (docs/exercises.md, "How a run executes").

While learner code runs (its module body, or any function or class it defined, called
by the checks), the collectives named in the exercise's `forbid` raise
ForbiddenCollective. The probes call `check` for every outermost torch.distributed
call after recording its start, so the call is still in the trace, with its error.
`check` also counts the collectives learner code made, for checks that need to know
(`learner_calls`).

Imports nothing but the standard library: the app uses CHECKS_MARK, FORBIDDABLE and
`compose` without importing torch.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

CHECKS_MARK = "\n\n\n# ---- the exercise's checks ----\n"
# The file name a snippet (or an exercise's learner code) runs under, in tracebacks too.
SNIPPET_FILE = "snippet.py"
_OPTIONS_PREFIX = "# exercise: "
# The torch.distributed calls an exercise may forbid: the probes' collectives a snippet
# calls by name (not DDP's internal C++ bindings, nor new_group).
FORBIDDABLE = frozenset({
    "all_reduce", "all_reduce_coalesced", "reduce", "broadcast", "all_gather",
    "all_gather_into_tensor", "all_gather_coalesced", "all_gather_object", "gather",
    "gather_object", "scatter", "scatter_object_list", "broadcast_object_list",
    "reduce_scatter", "reduce_scatter_tensor", "all_to_all", "all_to_all_single",
    "barrier", "monitored_barrier", "send", "recv", "isend", "irecv", "send_object_list",
    "recv_object_list", "batch_isend_irecv",
})
_POINT_TO_POINT = frozenset({"send", "recv", "isend", "irecv"})


class ForbiddenCollective(RuntimeError):
    """Learner code called a collective the exercise forbids."""


def compose(code: str, checks: str, *, forbid: Iterable[str] = ()) -> str:
    """The text an exercise run executes: `code`, the mark, the options, the checks program."""
    options = json.dumps({"forbid": sorted(set(forbid))}, separators=(",", ":"))
    return f"{code}{CHECKS_MARK}{_OPTIONS_PREFIX}{options}\n{checks}"


def split(text: str) -> tuple[str, str, dict[str, Any]] | None:
    """(learner code, checks program, options) of an exercise run's text; None for a plain snippet.

    The checks program is exactly the author's file, so its line numbers are the file's.
    """
    head, mark, tail = text.rpartition(CHECKS_MARK)
    if not mark:
        return None
    first, _, rest = tail.partition("\n")
    options: dict[str, Any] = {}
    if first.startswith(_OPTIONS_PREFIX):
        try:
            loaded = json.loads(first[len(_OPTIONS_PREFIX):])
        except ValueError:
            loaded = {}
        options = loaded if isinstance(loaded, dict) else {}
        return head, rest, options
    return head, tail, options


def learner_part(text: str) -> str:
    """The code before the checks (the whole text for a plain snippet)."""
    parts = split(text)
    return text if parts is None else parts[0]


# --------------------------------------------------------------- inside a rank
_forbidden: frozenset[str] = frozenset()
_depth = 0
_calls: dict[str, int] = {}
# Called when a guarded learner call returns: the harness re-checks what it watches.
_after_call: Callable[[], None] | None = None


def configure(names: Iterable[str], *, after_call: Callable[[], None] | None = None) -> None:
    """Set this rank's forbidden collectives (once, before learner code runs)."""
    global _forbidden, _after_call
    _forbidden = frozenset(n for n in names if n in FORBIDDABLE)
    _after_call = after_call


def check(name: str) -> None:
    """Called by the probes for every outermost collective, after recording its start."""
    if _depth:
        _calls[name] = _calls.get(name, 0) + 1
        if name in _forbidden:
            raise ForbiddenCollective(_message(name))


def _message(name: str) -> str:
    if _forbidden & _POINT_TO_POINT:
        return f"{name} is not allowed in this exercise"
    return f"{name} is not allowed in this exercise: write it with send/recv"


def learner_calls(*ops: str) -> int:
    """How many of these collectives learner code has called so far on this rank."""
    return sum(_calls.get(op, 0) for op in ops)


@contextmanager
def learner() -> Iterator[None]:
    """Learner code runs inside: the forbidden collectives raise."""
    global _depth
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1


def guard(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` (defined by learner code), run under the exercise's rules whenever it is called."""
    if getattr(fn, "__ddpdrill_guarded__", False):
        return fn

    @functools.wraps(fn)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        global _depth
        _depth += 1
        try:
            return fn(*args, **kwargs)
        finally:
            _depth -= 1
            if not _depth and _after_call is not None:
                _after_call()

    guarded.__ddpdrill_guarded__ = True  # type: ignore[attr-defined]
    return guarded
