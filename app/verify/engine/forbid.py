"""The exercise contract as text: where the checks program starts, and which collectives an
exercise forbids.

An exercise run is one text: the learner's code (or the reference solution, the
starter, a known-wrong solution), then CHECKS_MARK, one line of options (the
forbidden collectives, the reference solution's code, whether the ranks share a
folder), and the exercise's checks program. The app composes it (`compose`), so all
of it is part of the run's cache key; the engine splits it at the LAST mark
(`split`), so a mark inside learner code stays learner code. The engine hands the
learner process only the learner's code and the checks program; the options stay
with the driver (driver.py), which enforces `forbid` on every operation.

Imports nothing but the standard library: the app uses it without importing torch.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

CHECKS_MARK = "\n\n\n# ---- the exercise's checks ----\n"
# The file name a snippet (or an exercise's learner code) runs under, in tracebacks too.
SNIPPET_FILE = "snippet.py"
# The file name an exercise's checks run under (tracebacks tell the two apart).
CHECKS_FILE = "checks.py"
_OPTIONS_PREFIX = "# exercise: "
# What an exercise may forbid: torch.distributed's names, each with the operations of the
# process group it comes down to (the driver sees only those: isend is a send). The object
# collectives are made of the plain ones (all_gather_object of all_gathers): forbid those to
# forbid them; named alone they forbid nothing.
FORBIDDABLE: dict[str, frozenset[str]] = {
    "all_reduce": frozenset({"all_reduce"}),
    "all_reduce_coalesced": frozenset({"all_reduce_coalesced"}),
    "reduce": frozenset({"reduce"}),
    "broadcast": frozenset({"broadcast"}),
    "all_gather": frozenset({"all_gather"}),
    "all_gather_into_tensor": frozenset({"all_gather_into_tensor"}),
    "all_gather_coalesced": frozenset({"all_gather_coalesced"}),
    "all_gather_object": frozenset(),
    "gather": frozenset({"gather"}),
    "gather_object": frozenset(),
    "scatter": frozenset({"scatter"}),
    "scatter_object_list": frozenset(),
    "broadcast_object_list": frozenset(),
    "reduce_scatter": frozenset({"reduce_scatter"}),
    "reduce_scatter_tensor": frozenset({"reduce_scatter_tensor"}),
    "all_to_all": frozenset({"all_to_all"}),
    "all_to_all_single": frozenset({"all_to_all_single"}),
    "barrier": frozenset({"barrier"}),
    "monitored_barrier": frozenset({"barrier"}),
    "send": frozenset({"send"}),
    "recv": frozenset({"recv"}),
    "isend": frozenset({"send"}),
    "irecv": frozenset({"recv"}),
    "send_object_list": frozenset(),
    "recv_object_list": frozenset(),
    "batch_isend_irecv": frozenset({"send", "recv"}),
}
_POINT_TO_POINT = frozenset({"send", "recv"})


class ForbiddenCollective(RuntimeError):
    """Learner code called a collective the exercise forbids."""


def compose(code: str, checks: str, *, forbid: Iterable[str] = (), reference: str | None = None,
            shared_folder: bool = False) -> str:
    """The text an exercise run executes: `code`, the mark, the options, the checks program."""
    options: dict[str, Any] = {"forbid": sorted(set(forbid))}
    if reference is not None:
        options["reference"] = reference
    if shared_folder:
        options["shared_folder"] = True
    return f"{code}{CHECKS_MARK}{_OPTIONS_PREFIX}{json.dumps(options, separators=(',', ':'))}\n{checks}"


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


def operations(names: Iterable[Any]) -> frozenset[str]:
    """The process-group operations that the forbidden torch.distributed names come down to."""
    out: set[str] = set()
    for name in names:
        if isinstance(name, str):
            out |= FORBIDDABLE.get(name, frozenset())
    return frozenset(out)


def message(op: str, forbidden: frozenset[str]) -> str:
    """What the learner's call of a forbidden operation raises."""
    if forbidden & _POINT_TO_POINT:
        return f"{op} is not allowed in this exercise"
    return f"{op} is not allowed in this exercise: write it with send/recv"
