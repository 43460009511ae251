"""The /plan page: a layout's form and its numbers, redrawn by htmx from the same template;
"Practise this" (a quiz of the questions behind a number) and "Measure it small"."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, BackgroundTasks, Path, Request
from fastapi.responses import RedirectResponse, Response
from sqlalchemy.orm import Session

from app.deps import (
    CSRF,
    CurrentLearner,
    FormDep,
    SessionDep,
    SettingsDep,
    client_ip,
    is_htmx,
    notify_workers,
)
from app.errors import DomainError, InvalidInput
from app.planner import explain, forms, presets, service
from app.planner.schemas import FORM_FIELDS
from app.render.plans import Segment, stacked_bar
from app.templating import templates

router = APIRouter(include_in_schema=False)

MAX_ID = 2**31 - 1
SECTIONS = (
    ("Model", "model"), ("Cluster", "cluster"), ("Layout", "layout"), ("Training run", "training"))


def _charts(state: forms.FormState) -> dict[str, Any]:
    n = state.numbers
    if n is None:
        return {}
    memory = stacked_bar(
        [Segment("Parameters", n.param_bytes, explain.gb(n.param_bytes)),
         Segment("Gradients", n.grad_bytes, explain.gb(n.grad_bytes)),
         Segment("Optimizer state", n.optimizer_bytes, explain.gb(n.optimizer_bytes)),
         Segment("Activations", n.activation_bytes, explain.gb(n.activation_bytes))],
        title="Memory per GPU by component",
        desc=(f"{explain.gb(n.total_bytes)} against {explain.gb(n.capacity_bytes)} of GPU memory: "
              + ("fits." if n.fits else f"does not fit by {explain.gb(-n.margin_bytes)}.")),
        svg_id="memory-bar", capacity=n.capacity_bytes,
        capacity_text=f"GPU memory {explain.gb(n.capacity_bytes)}",
        total_text=f"{explain.gb(n.total_bytes)} per GPU")
    step_segments = []
    if n.compute_s is not None and n.tp_s is not None and n.dp_exposed_s is not None:
        compute = max(n.compute_s, 0.0)
        step_segments = [Segment("Compute and the rest", compute, explain.duration(compute)),
                         Segment("Pipeline bubble", n.bubble_s, explain.duration(n.bubble_s)),
                         Segment("Tensor-parallel communication", n.tp_s, explain.duration(n.tp_s)),
                         Segment("Exposed data-parallel communication", n.dp_exposed_s,
                                 explain.duration(n.dp_exposed_s))]
    else:
        step_segments = [Segment("Compute, communication and the rest", n.step_s - n.bubble_s,
                                 explain.duration(n.step_s - n.bubble_s)),
                         Segment("Pipeline bubble", n.bubble_s, explain.duration(n.bubble_s))]
    step = stacked_bar(step_segments, title="One step's time by where it goes",
                       desc=f"{explain.duration(n.step_s)} per step at the assumed MFU.",
                       svg_id="step-bar", total_text=f"{explain.duration(n.step_s)} per step")
    return {"memory_chart": memory, "step_chart": step}


def _context(state: forms.FormState, db_session: Session) -> dict[str, Any]:
    slugs = {s for group in explain.QUESTIONS.values() for s in group}
    linked = service.linked_questions(db_session=db_session, slugs=slugs)
    links = {key: [linked[s] for s in group if s in linked] for key, group in explain.QUESTIONS.items()}
    whys = explain.whys(state.plan, state.numbers) if state.plan and state.numbers else {}
    sections = [(title, [f for f in FORM_FIELDS if f.loc[0] == loc]) for title, loc in SECTIONS]
    return {"state": state, "n": state.numbers, "whys": whys, "links": links, "sections": sections,
            "models": presets.MODELS, "gpus": presets.GPUS, "mtbf_source": presets.MTBF_SOURCE,
            "model_preset": presets.MODEL_BY_KEY.get(state.model_preset),
            "gpu_preset": presets.GPU_BY_KEY.get(state.gpu_preset),
            "fmt": explain, **_charts(state)}


@router.get("/plan")
def plan_page(request: Request, db_session: SessionDep) -> Response:
    """The planner: the page, or (htmx) the form and result that replace themselves."""
    state = forms.read(request.query_params)
    template = "planner/_planner.html" if is_htmx(request) else "planner/plan.html"
    return templates.TemplateResponse(request, template, _context(state, db_session),
                                      status_code=422 if state.errors else 200,
                                      headers={"Vary": "HX-Request"})


@router.post("/plan/practise")
def practise(request: Request, form: FormDep, db_session: SessionDep, learner_id: CurrentLearner,
             _: CSRF) -> Response:
    """A quiz of the questions behind one number (or all of them)."""
    key = form.get("key")
    if key == "all":
        slugs = {s for group in explain.QUESTIONS.values() for s in group}
    elif isinstance(key, str) and key in explain.QUESTIONS:
        slugs = set(explain.QUESTIONS[key])
    else:
        raise InvalidInput("No such number to practise.", loc=("key",))
    quiz_id = service.practise(db_session=db_session, learner_id=learner_id, slugs=slugs)
    target = f"/quizzes/{quiz_id}/1"
    if is_htmx(request):
        return Response(status_code=204, headers={"HX-Redirect": target})
    return RedirectResponse(target, status_code=303)


@router.post("/plan/measure")
def measure(request: Request, form: FormDep, background: BackgroundTasks, db_session: SessionDep,
            settings: SettingsDep, learner_id: CurrentLearner, _: CSRF) -> Response:
    """Run the layout shrunk to at most four gloo ranks (or find it in the cache)."""
    state = forms.read({k: v for k, v in form.items() if isinstance(v, str)})
    if state.plan is None or state.errors:
        return templates.TemplateResponse(request, "planner/_measure.html", {
            "problem": "Fix the layout first: " + "; ".join(state.errors.values())}, status_code=422)
    try:
        run, layout = service.start_measure(
            db_session=db_session, plan=state.plan, learner_id=learner_id,
            client_ip=client_ip(request), limit_per_minute=settings.verify_rate_per_minute)
    except DomainError as exc:
        return templates.TemplateResponse(request, "planner/_measure.html", {"problem": str(exc)},
                                          status_code=exc.status, headers=exc.headers or None)
    background.add_task(notify_workers, request)
    ctx = {"layout": layout, "m": service.measurement(db_session=db_session, run_id=run.id)}
    if not is_htmx(request):
        return RedirectResponse(f"/plan/measure/{run.id}", status_code=303)
    return templates.TemplateResponse(request, "planner/_measure.html", ctx)


@router.get("/plan/measure/{run_id}")
def measurement(run_id: Annotated[int, Path(ge=1, le=MAX_ID)], request: Request,
                db_session: SessionDep) -> Response:
    """A small run: polling while it runs, then the prediction beside the measurement."""
    m = service.measurement(db_session=db_session, run_id=run_id)
    template = "planner/_measure_run.html" if is_htmx(request) else "planner/measure_page.html"
    return templates.TemplateResponse(request, template, {"m": m, "layout": m.layout})
