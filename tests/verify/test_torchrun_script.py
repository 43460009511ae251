"""The copied or downloaded torchrun script reproduces the page: it carries the run's timeout as
the process group's timeout= and prints each rank's outcome; a hang question's script ends
after that timeout under real `torchrun`, not after gloo's 30-minute default."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from app.questions.bank import load_bank
from app.verify import knobs
from app.verify.torchrun import pg_timeout_s, torchrun_script
from tests.factories import REAL_BANK

# Bounds a broken script (a hang would otherwise last gloo's 30 minutes); on a loaded
# 2-core machine starting two ranks alone can take ~20 s.
SUBPROCESS_BOUND_S = 240


def _torchrun(script: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
         str(script)], capture_output=True, text=True, timeout=SUBPROCESS_BOUND_S,
        cwd=script.parent)


def test_a_hang_questions_script_times_out_like_the_page_and_says_so(tmp_path: Path) -> None:
    bank = load_bank(REAL_BANK)
    doc = next(q for q in bank.questions if q.slug == "uneven-trace-without-join")
    assert doc.verify is not None and doc.snippet_text is not None
    world_size, params = knobs.resolve(doc.verify, {})
    assert params == {"join": False}
    script = tmp_path / f"{doc.slug}.py"
    script.write_text(torchrun_script(slug=doc.slug, title=doc.title, snippet=doc.snippet_text,
                                      world_size=world_size, params=params,
                                      timeout_s=doc.verify.timeout_s))
    pg = pg_timeout_s(doc.verify.timeout_s)
    assert f"TIMEOUT_S = {pg!r}" in script.read_text()
    out = _torchrun(script)
    assert out.returncode != 0
    # The same diagnosis as the page: rank 0 left blocked in a collective until the timeout.
    outcome = [line for line in out.stdout.splitlines() if line.startswith("[rank 0] outcome:")]
    assert len(outcome) == 1, out.stdout + out.stderr[-3000:]
    assert outcome[0].startswith("[rank 0] outcome: timeout: blocked in a collective")
    assert f"({pg:g} s)" in outcome[0]
    # The ranks themselves do not warn about NumPy (only torchrun's launcher may, once).
    assert out.stderr.count("Failed to initialize NumPy") <= 1


def test_a_finishing_script_prints_values_and_the_finished_outcome(tmp_path: Path) -> None:
    script = tmp_path / "fixture-single.py"
    script.write_text(torchrun_script(slug="fixture-single", title="t", world_size=2,
                                      params={"scale": 2}, timeout_s=7,
                                      snippet='report("g", 1.5 * params["scale"])\n'))
    assert "_set_pg_timeout(timedelta(seconds=TIMEOUT_S))" in script.read_text()
    out = _torchrun(script)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "[rank 0] g = 3.0" in out.stdout
    assert "[rank 0] outcome: finished" in out.stdout and "[rank 1] outcome: finished" in out.stdout
    assert out.stderr.count("Failed to initialize NumPy") <= 1


def test_an_evidence_questions_script_writes_its_profile_as_a_chrome_trace(tmp_path: Path) -> None:
    bank = load_bank(REAL_BANK)
    doc = next(q for q in bank.questions if q.slug == "evidence-ddp-profile-overlap")
    assert doc.verify is not None and doc.snippet_text is not None
    world_size, params = knobs.resolve(doc.verify, {})
    script = tmp_path / f"{doc.slug}.py"
    script.write_text(torchrun_script(slug=doc.slug, title=doc.title, snippet=doc.snippet_text,
                                      world_size=world_size, params=params,
                                      timeout_s=doc.verify.timeout_s))
    out = _torchrun(script)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "[rank 0] artifact step (profile) written to step-rank0.trace.json" in out.stdout
    trace = json.loads((tmp_path / "step-rank0.trace.json").read_text())
    assert any(e.get("name") == "gloo:all_reduce" for e in trace["traceEvents"])
