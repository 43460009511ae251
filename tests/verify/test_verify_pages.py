"""The Verify panel in the page: predict-then-run, the answer key only after answering, polling, knobs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bs4 import BeautifulSoup
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from app.settings import Settings
from app.verify.torchrun import torchrun_script
from app.verify.worker import Worker
from tests.factories import answered

HX = {"HX-Request": "true"}


def soup(html: str) -> BeautifulSoup:
    return BeautifulSoup(html, "lxml")


def csrf(client: TestClient, path: str) -> str:
    token = soup(client.get(path).text).select_one("input[name=csrf_token]")
    assert token is not None
    return str(token["value"])


def start(client: TestClient, slug: str, **knobs: str) -> BeautifulSoup:
    data = {"csrf_token": csrf(client, f"/questions/{slug}"), **{f"knob.{k}": v for k, v in knobs.items()}}
    r = client.post(f"/questions/{slug}/verify", data=data, headers=HX)
    assert r.status_code == 200, r.text
    return soup(r.text)


def finish(client: TestClient, factory: sessionmaker[Session], settings: Settings, run_id: str,
           slug: str) -> BeautifulSoup:
    assert Worker(factory, settings).run_once()
    r = client.get(f"/runs/{run_id}", params={"slug": slug}, headers=HX)
    assert r.status_code == 200
    return soup(r.text)


def test_question_with_snippet_offers_predict_then_run_before_answering(client: TestClient) -> None:
    page = soup(client.get("/questions/fixture-single").text)
    panel = page.select_one("#verify-panel")
    assert panel is not None
    assert panel.select_one("h2").get_text(strip=True) == "Predict, then run"
    assert panel.select_one("select[name='knob.scale']") is not None
    assert soup(client.get("/questions/fixture-multi").text).select_one("#verify-panel") is None


def test_pending_run_polls_and_done_run_stops_polling(
    client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    answered(client)
    pending = start(client, "fixture-single").select_one(".run")
    assert pending is not None and pending["data-status"] == "queued"
    assert pending["hx-trigger"] == "load delay:300ms"
    done = finish(client, session_factory, settings, pending["data-run-id"], "fixture-single")
    run = done.select_one(".run")
    assert run is not None and run["data-status"] == "done" and not run.has_attr("hx-trigger")
    cells = [td.get_text(strip=True) for td in run.select("td.value[data-name=g]")]
    assert cells == ["1.5", "1.5"]
    assert run.select_one("svg.timeline title") is not None
    assert run.select_one("svg.timeline desc") is not None


def test_answer_key_is_not_compared_before_the_learner_answers(
    client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    # Before answering there is no run to read: Verify is refused (predict, then run).
    refused = client.post("/questions/fixture-single/verify",
                          data={"csrf_token": csrf(client, "/questions/fixture-single")}, headers=HX)
    assert refused.status_code == 409
    assert "SENTINEL-RIGHT" not in refused.text
    answer = client.post("/questions/fixture-single/answer",
                         data={"answer": "b", "csrf_token": csrf(client, "/questions/fixture-single")},
                         headers=HX)
    # The graded fragment swaps the panel into its answered form out of band.
    oob = soup(answer.text).select_one("#verify-panel[hx-swap-oob]")
    assert oob is not None and oob.select_one("h2").get_text(strip=True) == "Verify by running it"
    run_id = start(client, "fixture-single").select_one(".run")["data-run-id"]
    after = finish(client, session_factory, settings, run_id, "fixture-single")
    rows = after.select(".checks tbody tr")
    assert [r["class"] for r in rows] == [["pass"], ["pass"]]
    assert "SENTINEL-RIGHT" in after.select_one(".checks").get_text()


def test_rerun_with_another_knob_shows_both_runs_and_what_changed(
    client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    answered(client)
    first = start(client, "fixture-single").select_one(".run")["data-run-id"]
    done = finish(client, session_factory, settings, first, "fixture-single")
    # The finished fragment tells the knob form (out of band) which run to compare with next.
    assert done.select_one("#prev-run[hx-swap-oob]")["value"] == first
    data = {"csrf_token": csrf(client, "/questions/fixture-single"), "knob.scale": "2", "prev": first}
    pair = soup(client.post("/questions/fixture-single/verify", data=data, headers=HX).text)
    # The new run leads, full width; the previous one is folded below it.
    now, before = pair.select_one(".run-compare .run-now"), pair.select_one(".run-compare details.run-before")
    assert before.select_one(".run")["data-run-id"] == first
    second = now.select_one(".run")["data-run-id"]
    assert second != first
    Worker(session_factory, settings).run_once()
    frag = soup(client.get(f"/runs/{second}", params={"slug": "fixture-single", "prev": first},
                           headers=HX).text)
    changes = {row.th.get_text(strip=True): [td.get_text(strip=True) for td in row.select("td")]
               for row in frag.select(".compare tbody tr")}
    assert changes["g on rank 0"] == ["1.5", "3.0", "+1.5 (+100%)"]
    assert changes["g on rank 1"] == ["1.5", "3.0", "+1.5 (+100%)"]
    # The knob is named by its label, its values in words, the runs as "the run before" and
    # "this run" (never by their numbers, which need not grow with time).
    knob = frag.select_one(".compare tr.knob")
    assert knob is not None
    assert [td.get_text(strip=True) for td in knob.select("td")] == ["1", "2", "you changed it"]
    assert frag.select_one(".compare h3").get_text(strip=True) == "What changed since the run before"
    heads = [th.get_text(strip=True) for th in frag.select(".compare thead th")]
    assert heads[1:3] == ["The run before", "This run"]


def test_disallowed_knob_from_the_form_is_a_clear_error(client: TestClient) -> None:
    data = {"csrf_token": csrf(client, "/questions/fixture-single"), "knob.scale": "7"}
    r = client.post("/questions/fixture-single/verify", data=data, headers=HX)
    assert r.status_code == 422
    assert "scale" in soup(r.text).select_one("[role=alert]").get_text()


def test_verify_form_without_javascript_redirects_to_the_run_page(
    client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    answered(client)
    data = {"csrf_token": csrf(client, "/questions/fixture-single")}
    r = client.post("/questions/fixture-single/verify", data=data, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/runs/")
    page = soup(client.get(r.headers["location"]).text)
    assert page.select_one("noscript meta[http-equiv=refresh]") is not None
    Worker(session_factory, settings).run_once()
    page = soup(client.get(r.headers["location"]).text)
    assert page.select_one(".run")["data-status"] == "done"


def test_verify_form_without_csrf_token_is_refused(client: TestClient) -> None:
    r = client.post("/questions/fixture-single/verify", data={"knob.scale": "1"})
    assert r.status_code == 403


def test_torchrun_script_download_carries_snippet_and_knobs(client: TestClient) -> None:
    # The snippet to run at home is a measurement: the learner's once they answered (409 before).
    assert client.get("/questions/fixture-single/torchrun.py").status_code == 409
    answered(client)
    r = client.get("/questions/fixture-single/torchrun.py", params={"knob.scale": "2"})
    assert r.status_code == 200
    assert 'filename="fixture-single.py"' in r.headers["content-disposition"]
    assert 'report("g", 1.5 * params["scale"])' in r.text
    assert '{"scale": 2}' in r.text
    # The run's timeout goes with it, as the process group's timeout=.
    assert "TIMEOUT_S = 8.0" in r.text and "_set_pg_timeout(timedelta(seconds=TIMEOUT_S))" in r.text
    assert client.get("/questions/fixture-single/torchrun.py", params={"knob.scale": "9"}).status_code == 422


def test_torchrun_script_runs_the_snippet_unchanged(tmp_path: Path) -> None:
    """The wrapped snippet really runs under torchrun (no database involved, so once)."""
    script = tmp_path / "fixture-single.py"
    script.write_text(torchrun_script(slug="fixture-single", title="t", world_size=2, params={"scale": 2},
                                      snippet='report("g", 1.5 * params["scale"])\n'))
    out = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
         str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "[rank 0] g = 3.0" in out.stdout and "[rank 1] g = 3.0" in out.stdout
