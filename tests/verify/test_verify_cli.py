"""`ddpdrill verify`: exit codes, --json, --param, --repeat."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli import app
from app.cli import verify as verify_cli
from app.verify import knobs
from app.verify.engine import Engine

SNIPPET = """
import torch, torch.distributed as dist
t = torch.full((2,), float(rank + 1))
dist.all_reduce(t)
report("t", t)
report("params", params)
"""


@pytest.fixture
def cli(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setattr(verify_cli, "get_engine", lambda **_: engine)
    return CliRunner()


@pytest.fixture
def snippet(tmp_path: Path) -> Path:
    path = tmp_path / "snippet.py"
    path.write_text(SNIPPET)
    return path


def test_json_prints_only_the_result(cli: CliRunner, snippet: Path) -> None:
    result = cli.invoke(app, ["verify", str(snippet), "--json", "--param", "divide=false",
                              "--param", "sizes=[3,2]", "--param", "name=plain text"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["outcome"] == "ok"
    assert data["ranks"][0]["values"]["t"] == [3.0, 3.0]
    assert data["params"] == {"divide": False, "sizes": [3, 2], "name": "plain text"}
    assert data["ranks"][1]["values"]["params"] == data["params"]


def test_repeat_prints_a_json_list_from_one_pool(cli: CliRunner, snippet: Path,
                                                engine: Engine) -> None:
    starts = engine.forkserver_starts
    result = cli.invoke(app, ["verify", str(snippet), "--json", "--repeat", "3",
                              "--world-size", "3"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [d["outcome"] for d in data] == ["ok"] * 3
    assert all(d["world_size"] == 3 and d["ranks"][2]["values"]["t"] == [6.0, 6.0] for d in data)
    assert engine.forkserver_starts == starts


def test_readable_summary_shows_values_and_diagnosis(cli: CliRunner, snippet: Path) -> None:
    result = cli.invoke(app, ["verify", str(snippet), "--timeout", "5"])
    assert result.exit_code == 0, result.output
    assert "ok" in result.stdout and "Ranks" in result.stdout
    assert "Diagnosis: All 2 ranks finished the snippet normally." in result.stdout


def test_a_failing_snippet_still_exits_zero(cli: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "fail.py"
    path.write_text("raise RuntimeError('nope')\n")
    result = cli.invoke(app, ["verify", str(path), "--json", "--world-size", "1"])
    assert result.exit_code == 0
    assert json.loads(result.stdout)["outcome"] == "error"


def test_usage_errors_exit_two_with_a_clear_message(tmp_path: Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(app, ["verify", str(tmp_path / "nope.py")])
    assert missing.exit_code == 2 and "no such file" in missing.stderr

    bad = tmp_path / "bad.py"
    bad.write_text("x = 1\ndef f(:\n    pass\n")
    syntax = runner.invoke(app, ["verify", str(bad)])
    assert syntax.exit_code == 2 and "line 2: syntax error" in syntax.stderr

    good = tmp_path / "good.py"
    good.write_text("pass\n")
    for size in ("0", "9"):
        wrong = runner.invoke(app, ["verify", str(good), "--world-size", size])
        assert wrong.exit_code == 2 and "--world-size must be between 1 and 8" in wrong.stderr

    param = runner.invoke(app, ["verify", str(good), "--param", "novalue"])
    assert param.exit_code == 2 and "name=value" in param.stderr


def test_param_values_are_json_when_they_parse() -> None:
    assert knobs.from_pairs(["a=1", "b=false", "c=[3,2]", "d=hello", "e=", "f=x=y"]) == {
        "a": 1, "b": False, "c": [3, 2], "d": "hello", "e": "", "f": "x=y"}
