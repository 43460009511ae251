"""The editor on questions with variables, cases and talk-throughs: every field as text the author
edits and saves, errors naming the field, every variant previewed side by side with its key,
computed and measured values, and Run now running every variant on real gloo."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.questions.bank import load_bank
from app.questions.models import Question, QuestionRevision
from app.settings import Settings
from app.verify.models import PRIORITY_PRIVATE, PRIORITY_SHARED, Run
from app.verify.worker import Worker
from tests.authoring.helpers import editor_data
from tests.factories import VARIANT_BANK, count, htmx_headers, import_folder, parse, parse_fragment, text

SLUGS = sorted(q.slug for q in load_bank(VARIANT_BANK).questions)
MEASURED = "allreduce-bytes-per-rank"


def _editor(client: TestClient, slug: str) -> Any:
    page = client.get(f"/author/questions/{slug}")
    assert page.status_code == 200, page.text
    return parse(page)


def _errors(page: Any, field: str) -> list[str]:
    """The errors the editor shows under one field."""
    return [text(e) for e in page.select(f"ul.errors[data-field={field}] li")]


def test_the_editor_opens_and_saves_every_variant_case_and_talk_question_unchanged(
    admin_client: TestClient, session_factory: sessionmaker[Session],
) -> None:
    import_folder(session_factory, VARIANT_BANK)
    for slug in SLUGS:
        page = _editor(admin_client, slug)
        data = editor_data(page)
        if slug == "ring-send-volume":
            assert data["answer_formula"] == "per_rank_mb" and data["answer_value"] == ""
            assert data["variables"].startswith("world_size:")
            assert "exclude" in data["variants"] and "per_rank_mb" in data["compute"]
        if slug == "zero3-memory-case":
            assert data["type"] == "case" and data["parts"].startswith("- prompt:")
        if slug == "step-time-doubled-talk":
            assert data["type"] == "talk" and data["model_answer"].startswith("First keep")
            assert data["rubric"].startswith("- Protects")
        saved = admin_client.post(f"/author/questions/{slug}", data=data, follow_redirects=False)
        assert saved.status_code == 303, (slug, saved.text[:2000])
        assert saved.headers["location"].endswith("saved=same"), slug
    assert count(session_factory, QuestionRevision) == len(SLUGS)
    assert count(session_factory, Question, Question.draft_revision_id.is_not(None)) == 0


def test_editing_variables_and_parts_is_validated_by_the_loader_naming_the_field(
    admin_client: TestClient, session_factory: sessionmaker[Session],
) -> None:
    import_folder(session_factory, VARIANT_BANK)
    page = _editor(admin_client, "ring-send-volume")
    cases = [
        ({"compute": "per_rank_mb: 2 * (world_size - 1) / nodes * tensor_mb\n"}, "compute", "nodes"),
        ({"variables": "world_size: [2, 4]\ntensor_mb: oops: [1]\n"}, "variables", "YAML"),
        ({"answer_formula": "", "answer_value": "1200"}, "answer", ""),
        ({"prompt": "{{ chunks }} ranks"}, "prompt", "chunks"),
    ]
    for change, field, words in cases:
        r = admin_client.post("/author/questions/ring-send-volume", data=editor_data(page, **change))
        assert r.status_code == 422, (change, r.text[:500])
        errors = _errors(parse(r), field)
        assert errors and words in " ".join(errors), (change, errors)
    case = _editor(admin_client, "zero3-memory-case")
    r = admin_client.post("/author/questions/zero3-memory-case",
                          data=editor_data(case, parts="- prompt: Only one\n  type: single\n"))
    assert r.status_code == 422 and _errors(parse(r), "parts")
    talk = _editor(admin_client, "step-time-doubled-talk")
    r = admin_client.post("/author/questions/step-time-doubled-talk",
                          data=editor_data(talk, rubric="- only one move\n"))
    assert r.status_code == 422 and _errors(parse(r), "rubric")
    # A real change saves as a new draft revision, which learners do not see yet.
    r = admin_client.post("/author/questions/ring-send-volume", follow_redirects=False,
                          data=editor_data(page, variables="world_size: [2, 4, 8]\n"
                                                            "tensor_mb: [200, 800]\n", variants=""))
    assert r.status_code == 303 and r.headers["location"].endswith("saved=1")


def test_the_preview_shows_every_variant_with_its_key_and_computed_values(
    admin_client: TestClient, session_factory: sessionmaker[Session],
) -> None:
    import_folder(session_factory, VARIANT_BANK)
    page = _editor(admin_client, "ring-send-volume")
    r = admin_client.post("/author/preview/question", data=editor_data(page),
                          headers=htmx_headers(page))
    assert r.status_code == 200
    frag = parse_fragment(r)
    cards = frag.select(".variant-card")
    assert len(cards) == 8
    doc = next(q for q in load_bank(VARIANT_BANK).questions if q.slug == "ring-send-volume")
    for card in cards:
        i = int(card["data-variant"])
        rendered = doc.render(i)
        assert text(card.select_one("h3")).startswith(f"variant {i + 1} (world_size=")
        assert text(card.select_one(".preview-key")) == f"{rendered.answer.value:g}"
        computed = {text(r.select_one("th")): text(r.select_one("td")) for r in card.select(".computed tr")}
        assert set(computed) == {"per_rank_mb", "steps"}
        assert float(computed["per_rank_mb"]) == rendered.answer.value
    case = _editor(admin_client, "zero3-memory-case")
    frag = parse_fragment(admin_client.post("/author/preview/question", data=editor_data(case),
                                            headers=htmx_headers(case)))
    assert len(frag.select(".variant-card")) == 4
    assert all(len(c.select(".preview-parts > li")) == 3 for c in frag.select(".variant-card"))


def test_run_now_runs_every_variant_and_the_preview_then_shows_what_was_measured(
    admin_client: TestClient, session_factory: sessionmaker[Session], settings: Settings,
) -> None:
    import_folder(session_factory, VARIANT_BANK)
    page = _editor(admin_client, MEASURED)
    data = editor_data(page)
    r = admin_client.post("/author/run", data=data, headers=htmx_headers(page))
    assert r.status_code == 200, r.text
    pending = parse_fragment(r).select(".author-run")
    assert len(pending) == 4
    assert all(p["hx-post"] == f"/author/runs/{p['data-run-id']}" for p in pending)
    worker = Worker(session_factory, settings)
    while worker.run_once():
        pass
    with session_factory() as s:
        runs = {r.id: r for r in s.scalars(select(Run))}
    assert sorted((r.world_size, r.params["mib"]) for r in runs.values()) == [
        (2, 1), (2, 4), (4, 1), (4, 4)]
    for i, p in enumerate(pending):
        done = admin_client.post(f"/author/runs/{p['data-run-id']}", data={**data, "variant": str(i)},
                                 headers=htmx_headers(page))
        result = parse_fragment(done)
        assert result.select_one(".author-run")["data-status"] == "done"
        assert f"variant {i + 1} (" in text(result.select_one("h2"))
        assert [row["class"] for row in result.select(".checks tbody tr")] == [["pass"]] * 4
    frag = parse_fragment(admin_client.post("/author/preview/question", data=data,
                                            headers=htmx_headers(page)))
    for card in frag.select(".variant-card"):
        measured = card.select(".checks-measured li")
        assert len(measured) == 4 and all("pass" in m["class"] for m in measured)
    # Verify all on a draft plans every variant too; the gate names each by its values. Run
    # now's runs were the author's own, so the gate queues the shared runs learners will see.
    saved = admin_client.post(f"/author/questions/{MEASURED}", follow_redirects=False,
                              data={**data, "title": "Bytes per rank of one all-reduce"})
    assert saved.status_code == 303 and saved.headers["location"].endswith("saved=1")
    gate = admin_client.post(f"/author/questions/{MEASURED}/verify", data={"fresh": "0",
                             "csrf_token": data["csrf_token"]}, headers=htmx_headers(page))
    assert gate.status_code == 200
    while worker.run_once():
        pass
    gate = admin_client.post(f"/author/questions/{MEASURED}/verify", data={"fresh": "0",
                             "csrf_token": data["csrf_token"]}, headers=htmx_headers(page))
    rows = parse_fragment(gate).select(".gate-combos tbody tr")
    assert [text(r.select_one(".combo-variant")) for r in rows] == [
        "variant 1 (world_size=2, mib=1)", "variant 2 (world_size=2, mib=4)",
        "variant 3 (world_size=4, mib=1)", "variant 4 (world_size=4, mib=4)"]
    assert all(r["class"] == ["pass"] for r in rows)
    with session_factory() as s:
        priorities = sorted(r.priority for r in s.scalars(select(Run)))
    assert priorities == [PRIORITY_SHARED] * 4 + [PRIORITY_PRIVATE] * 4
