"""The Jinja environment shared by every view: the render layer's filters and pictures, and
the knob codec's compact JSON.

It reads no feature's services or models: a run's result comes from the view that shows
it, and the few words pages of several features show (report kinds, confidence levels)
app/main.py adds.
"""

from __future__ import annotations

from pathlib import Path

from fastapi.templating import Jinja2Templates

from app.csrf import csrf_token
from app.render.artifacts import (
    CATEGORY_WORDS,
    artifact_picture,
    bytes_size,
    flight_groups,
    flight_sequences,
    memory_groups,
    profile_rows,
    run_artifacts,
)
from app.render.markdown import breakable, highlight_code, render_inline, render_markdown
from app.render.runs import (
    bucket_iterations,
    bucket_views,
    error_lines,
    knob_text,
    pipeline_picture,
    timeline_picture,
    value_names,
    warning_count,
)
from app.render.traces import static_bucket_picture, static_rank_picture
from app.render.when import day_name, until
from app.verify import knobs

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
    # every template's file (a stat) each time one is extended or included, several times
    # per page.
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
    env.globals["artifact_picture"] = artifact_picture
    env.globals["run_artifacts"] = run_artifacts
    env.globals["profile_rows"] = profile_rows
    env.globals["memory_groups"] = memory_groups
    env.globals["span_categories"] = CATEGORY_WORDS
    env.globals["flight_sequences"] = flight_sequences
    env.globals["flight_groups"] = flight_groups
    env.filters["bytes_size"] = bytes_size
    env.globals["timeline_picture"] = timeline_picture
    env.globals["pipeline_picture"] = pipeline_picture
    env.globals["bucket_views"] = bucket_views
    env.globals["bucket_iterations"] = bucket_iterations
    env.globals["error_lines"] = error_lines
    env.globals["value_names"] = value_names
    env.globals["warning_count"] = warning_count
    # Compact JSON for showing measured values, and the knob codec's form values (the same text).
    env.filters["tojson_compact"] = knobs.encode
    # A knob's value as the page shows it: words, not JSON.
    env.filters["knob_text"] = knob_text
    env.globals["difficulty_names"] = DIFFICULTY_NAMES
    env.globals["format_names"] = FORMAT_NAMES
    return templates


templates = make_templates()
