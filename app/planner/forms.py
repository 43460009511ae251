"""The /plan form: the values it shows, the presets it applies, and a PlanIn read from it with a
message beside each field that is wrong. Pure (strings in, strings and a PlanIn out).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pydantic import ValidationError

from app.planner import presets
from app.planner.schemas import FIELD_BY_LOC, FORM_FIELDS, FormField, PlanIn
from app.planner.service import LayoutProblems, Numbers, evaluate

DEFAULT_MODEL = "llama3-70b"
DEFAULT_GPU = "h100"
# 70B on 64 nodes of 8 H100s, the design round's classic: tp 8 inside a node, 4 stages,
# 16 data-parallel replicas with ZeRO-1, 4M-token batches, Llama 3's 15T tokens.
DEFAULT_LAYOUT: dict[str, str] = {
    "gpus": "512", "gpus_per_node": "8", "dp": "16", "tp": "8", "pp": "4", "zero_stage": "1",
    "micro_batch": "1", "global_batch": "512", "interleave": "1", "sequence_parallel": "on",
    "recompute": "selective", "tokens_t": "15", "mfu_pct": "40", "checkpoint_seconds": "60",
    "mtbf_hours": str(presets.MTBF_HOURS_PER_GPU),
}


def _g(value: float) -> str:
    """A number as the form shows it: no trailing .0, no exponent for ordinary sizes."""
    text = f"{value:.10g}"
    return text if "e" not in text else f"{value:f}".rstrip("0").rstrip(".")


def model_values(key: str) -> dict[str, str]:
    m = presets.MODEL_BY_KEY[key]
    return {"params_b": _g(m.params / 1e9),
            "active_params_b": _g(m.active_params / 1e9) if m.active_params else "",
            "layers": str(m.layers), "hidden": str(m.hidden), "heads": str(m.heads),
            "seq_len": str(m.seq_len)}


def gpu_values(key: str) -> dict[str, str]:
    g = presets.GPU_BY_KEY[key]
    return {"gpu_memory_gb": _g(g.memory_gb), "peak_tflops": _g(g.peak_tflops),
            "nvlink_gb_s": _g(g.nvlink_gb_s), "network_gbit_s": _g(g.network_gbit_s)}


@dataclass
class FormState:
    """What the page shows: every field's text, the presets chosen, the messages by field, and
    (when the form holds a possible layout) the plan and its numbers."""

    values: dict[str, str]
    model_preset: str
    gpu_preset: str
    errors: dict[str, str] = field(default_factory=dict)
    plan: PlanIn | None = None
    numbers: Numbers | None = None

    def query(self) -> str:
        """The form as a query string: the address of this layout."""
        from urllib.parse import urlencode
        pairs = {"model_preset": self.model_preset, "gpu_preset": self.gpu_preset,
                 "applied_model": self.model_preset, "applied_gpu": self.gpu_preset}
        pairs.update({k: v for k, v in self.values.items() if v != "" and k != "sequence_parallel"})
        if self.values.get("sequence_parallel") == "on":
            pairs["sequence_parallel"] = "on"
        return urlencode(pairs)


def _preset(raw: object, known: Mapping[str, object], default: str) -> str:
    return raw if isinstance(raw, str) and (raw in known or raw == "custom") else default


def read(query: Mapping[str, str]) -> FormState:
    """The form's state from a request's fields. Without `applied_model` the request is a first
    visit: the defaults. A preset that differs from the one applied fills its fields."""
    first_visit = "applied_model" not in query
    model = _preset(query.get("model_preset"), presets.MODEL_BY_KEY, DEFAULT_MODEL)
    gpu = _preset(query.get("gpu_preset"), presets.GPU_BY_KEY, DEFAULT_GPU)
    if first_visit:
        values = {**DEFAULT_LAYOUT, **model_values(model if model != "custom" else DEFAULT_MODEL),
                  **gpu_values(gpu if gpu != "custom" else DEFAULT_GPU)}
        for f in FORM_FIELDS:  # a link may set any field on top of the defaults
            if f.name in query:
                values[f.name] = str(query[f.name])
    else:
        values = {f.name: str(query.get(f.name, "")).strip()[:40] for f in FORM_FIELDS}
        values["sequence_parallel"] = "on" if query.get("sequence_parallel") else ""
        if model != "custom" and model != query.get("applied_model"):
            values.update(model_values(model))
        if gpu != "custom" and gpu != query.get("applied_gpu"):
            values.update(gpu_values(gpu))
    state = FormState(values=values, model_preset=model, gpu_preset=gpu)
    state.plan = _parse(state)
    if state.plan is not None:
        try:
            state.numbers = evaluate(plan=state.plan)
        except LayoutProblems as exc:
            for problem in exc.problems:
                name = FIELD_BY_LOC[problem.loc].name if problem.loc in FIELD_BY_LOC else "dp"
                state.errors.setdefault(name, problem.message)
    return state


def _number(f: FormField, text: str) -> tuple[object, str | None]:
    if f.kind == "bool":
        return text == "on", None
    if f.kind == "choice":
        if text not in f.choices:
            return None, f"Choose one of {', '.join(f.choices)}."
        return (int(text) if f.loc[1] == "zero_stage" else text), None
    if text == "":
        return None, (None if f.optional else "Enter a number.")
    try:
        number = float(text.replace(",", "").replace("_", ""))
    except ValueError:
        return None, "Enter a number." if f.kind == "float" else "Enter a whole number."
    if f.kind == "int":
        if not number.is_integer():
            return None, "Enter a whole number."
        return int(number), None
    return number * f.scale, None


def _parse(state: FormState) -> PlanIn | None:
    body: dict[str, dict[str, object]] = {"model": {}, "cluster": {}, "layout": {}, "training": {}}
    for f in FORM_FIELDS:
        value, error = _number(f, state.values.get(f.name, ""))
        if error:
            state.errors[f.name] = error
        elif value is not None:
            body[f.loc[0]][f.loc[1]] = value
    if state.errors:
        return None
    try:
        return PlanIn.model_validate(body)
    except ValidationError as exc:
        for e in exc.errors():
            loc = (str(e["loc"][0]), str(e["loc"][1]) if len(e["loc"]) > 1 else "")
            field_ = FIELD_BY_LOC.get(loc)
            name = field_.name if field_ is not None else "dp"
            state.errors.setdefault(name, _message(e["msg"], field_))
        return None


def _message(pydantic_msg: str, f: FormField | None) -> str:
    """pydantic's words, in the form's units ("greater than 0" is the same in any unit)."""
    if f is not None and f.scale != 1.0 and any(c.isdigit() for c in pydantic_msg.split("than")[-1]):
        bound = pydantic_msg.rsplit(" ", 1)[-1]
        try:
            return pydantic_msg.rsplit(" ", 1)[0] + " " + _g(float(bound) / f.scale) + "."
        except ValueError:
            return pydantic_msg + "."
    return pydantic_msg.rstrip(".") + "."
