"""The Jinja environment shared by every view."""

from __future__ import annotations

from pathlib import Path

from fastapi.templating import Jinja2Templates

from app.csrf import csrf_token
from app.quizzes.models import CONFIDENCE_LEVELS
from app.render.markdown import breakable, highlight_code, render_inline, render_markdown
from app.render.runs import (
    bucket_iterations,
    bucket_views,
    error_lines,
    timeline_picture,
    value_names,
)
from app.render.traces import static_bucket_picture, static_rank_picture
from app.render.when import day_name, until
from app.reports.models import REPORT_KINDS
from app.verify import knobs
from app.verify.service import result_of

TEMPLATES_DIR = Path(__file__).resolve().parent.parent / "templates"
STATIC_DIR = Path(__file__).resolve().parent.parent / "static"

DIFFICULTY_NAMES = {1: "warm-up", 2: "core", 3: "deep"}
FORMAT_NAMES = {"single": "one answer", "multi": "several answers", "numeric": "a number",
                "trace": "read a trace", "exercise": "write the fix"}


def _ms(value: float | int | None) -> str:
    if value is None:
        return "—"
    seconds = value / 1000
    if seconds < 60:
        return f"{seconds:.1f} s"
    return f"{int(seconds // 60)} min {int(seconds % 60)} s"


def make_templates() -> Jinja2Templates:
    templates = Jinja2Templates(directory=str(TEMPLATES_DIR))
    env = templates.env
    # Templates ship with the app and do not change while it runs. Jinja's default looks at
    # every template's file (a stat) each time one is extended or included, six or seven
    # times per question page (docs/performance.md).
    env.auto_reload = False
    env.filters["markdown"] = render_markdown
    env.filters["inline"] = render_inline
    env.filters["duration"] = _ms
    env.filters["breakable"] = breakable
    env.filters["until"] = until
    env.filters["day_name"] = day_name
    env.globals["highlight"] = highlight_code
    env.globals["csrf_token"] = csrf_token
    env.globals["static_bucket_picture"] = static_bucket_picture
    env.globals["static_rank_picture"] = static_rank_picture
    env.globals["timeline_picture"] = timeline_picture
    env.globals["bucket_views"] = bucket_views
    env.globals["bucket_iterations"] = bucket_iterations
    env.globals["error_lines"] = error_lines
    env.globals["value_names"] = value_names
    env.globals["run_result"] = result_of
    # Compact JSON for showing measured values, and the knob codec's form values (the same text).
    env.filters["tojson_compact"] = knobs.encode
    env.globals["difficulty_names"] = DIFFICULTY_NAMES
    env.globals["format_names"] = FORMAT_NAMES
    env.globals["report_kinds"] = REPORT_KINDS
    env.globals["confidence_levels"] = CONFIDENCE_LEVELS
    return templates


templates = make_templates()
