"""Adapting stored question traces to the shared SVG components."""

from __future__ import annotations

from markupsafe import Markup

from app.questions.schema import BucketTrace, RankEventsTrace
from app.render.svg import BucketRow, Lane, Span, bucket_svg, timeline_svg


def static_bucket_rows(trace: BucketTrace) -> list[BucketRow]:
    return [BucketRow(b.name, b.first_ready_ms, b.last_ready_ms, b.reduce_start_ms, b.reduce_end_ms)
            for b in trace.buckets]


def static_bucket_picture(trace: BucketTrace, *, reveal: bool, svg_id: str = "trace-buckets") -> Markup:
    """The stored bucket table as a chart; exposed time is only marked once `reveal` is set."""
    rows = static_bucket_rows(trace)
    compute_end = trace.compute_end_ms
    desc = "; ".join(
        f"bucket {r.label}: gradients ready {r.first_ready:g} to {r.last_ready:g} {trace.unit}, "
        f"reduced {r.reduce_start:g} to {r.reduce_end:g} {trace.unit}"
        + (f", {r.exposed(compute_end):g} {trace.unit} exposed" if reveal else "")
        for r in rows
    ) + f". Backward compute ends at {trace.compute_end_ms:g} {trace.unit}."
    if not reveal:
        # Before the learner answers, draw the windows but not the answer (the shading).
        return bucket_svg(rows, compute_end, title=trace.caption or "Gradient-bucket timings",
                          desc=desc, unit=trace.unit, svg_id=svg_id, shade_exposed=False)
    return bucket_svg(rows, compute_end, title=trace.caption or "Gradient-bucket timings", desc=desc,
                      unit=trace.unit, svg_id=svg_id)


def static_rank_picture(trace: RankEventsTrace, svg_id: str = "trace-ranks") -> Markup:
    """A step-by-step rank trace as lanes: one box per rank and step, labelled with its events."""
    lanes = [Lane(label=col) for col in trace.columns]
    for i, step in enumerate(trace.steps):
        for lane, cell in zip(lanes, step.cells, strict=True):
            lane.spans.append(Span(i + 0.04, i + 0.96, "user", label=cell,
                                   title=f"{_step_name(step.step)}: {cell}"))
    desc = " ".join(
        f"{_step_name(s.step).capitalize()}: "
        + "; ".join(f"{c}: {cell}" for c, cell in zip(trace.columns, s.cells, strict=True))
        + "." for s in trace.steps
    )
    return timeline_svg(lanes, float(len(trace.steps)), title=trace.caption or "Per-rank trace",
                        desc=desc, unit="step", svg_id=svg_id,
                        axis_labels=[(i + 0.5, _step_name(s.step)) for i, s in enumerate(trace.steps)])


def _step_name(step: object) -> str:
    """The axis label of a step: "step 2" for a number, the bank's own words otherwise (a
    step already called "step 1" is not "step step 1")."""
    text = str(step)
    return text if text.lower().startswith("step") or not text.isdigit() else f"step {text}"
