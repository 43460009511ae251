"""The exercise format in bank files: what is accepted, what is refused, and a round trip."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from app.questions.bank import load_bank, write_bank
from app.questions.schema import MIN_WRONG_SOLUTIONS
from app.verify.engine.forbid import CHECKS_MARK
from tests.factories import EXERCISE_BANK


def _copy(tmp_path: Path) -> Path:
    dest = tmp_path / "bank"
    shutil.copytree(EXERCISE_BANK, dest)
    return dest


def _edit(bank: Path, change: dict) -> None:
    path = bank / "drills" / "fixture-exercise.yaml"
    data = yaml.safe_load(path.read_text())
    for key, value in change.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key].update(value)
        else:
            data[key] = value
    path.write_text(yaml.safe_dump(data))


def _messages(bank: Path) -> list[str]:
    return [f"{e.field}: {e.message}" for e in load_bank(bank).errors]


def test_the_fixture_exercise_loads_with_its_solution_and_harness_code() -> None:
    bank = load_bank(EXERCISE_BANK)
    assert bank.ok, bank.errors
    (doc,) = bank.questions
    assert doc.is_exercise and doc.exercise is not None
    assert "dist.all_reduce" in (doc.exercise.solution_code or "")
    assert "report(\"total\"" in (doc.exercise.harness_code or "")
    assert "dist.all_reduce" not in (doc.snippet_text or "")
    assert [e.hidden for e in doc.verify.expect] == [False, False, True]


def test_more_than_three_hints_are_refused(tmp_path: Path) -> None:
    bank = _copy(tmp_path)
    _edit(bank, {"exercise": {"hints": ["one", "two", "three", "four"]}})
    assert any("exercise.hints" in m for m in _messages(bank))


def test_a_missing_solution_file_is_named(tmp_path: Path) -> None:
    bank = _copy(tmp_path)
    (bank / "drills" / "solution.py").unlink()
    assert any("exercise.solution" in m and "not found" in m for m in _messages(bank))


def test_an_exercise_with_choices_is_refused(tmp_path: Path) -> None:
    bank = _copy(tmp_path)
    _edit(bank, {"choices": [{"text": "a", "correct": True}, {"text": "b"}]})
    assert any("choices" in m for m in _messages(bank))


def test_solution_code_written_in_yaml_is_refused(tmp_path: Path) -> None:
    bank = _copy(tmp_path)
    _edit(bank, {"exercise": {"solution_code": "print('not from the file')"}})
    assert any("exercise.solution_code" in m for m in _messages(bank))


def test_hidden_checks_belong_to_exercises_only(tmp_path: Path) -> None:
    source = Path(__file__).resolve().parents[1] / "fixtures" / "bank"
    bank = tmp_path / "bank"
    shutil.copytree(source, bank)
    path = bank / "basics" / "fixture-single.yaml"
    data = yaml.safe_load(path.read_text())
    data["verify"]["expect"][0]["hidden"] = True
    path.write_text(yaml.safe_dump(data))
    assert any("hidden" in m for m in _messages(bank))


def test_export_writes_the_solution_and_harness_files_and_reloads_unchanged(tmp_path: Path) -> None:
    bank = load_bank(EXERCISE_BANK)
    out = tmp_path / "out"
    write_bank(out, bank.questions, bank.topics)
    written = yaml.safe_load((out / "drills" / "fixture-exercise.yaml").read_text())
    assert "solution_code" not in written["exercise"] and "harness_code" not in written["exercise"]
    solution = (EXERCISE_BANK / "drills" / "solution.py").read_text()
    assert (out / "drills" / "solution.py").read_text() == solution
    again = load_bank(out)
    assert again.ok, again.errors
    assert again.questions == bank.questions


def test_the_real_bank_has_at_least_twelve_exercises() -> None:
    real = Path(__file__).resolve().parents[2] / "question_bank"
    bank = load_bank(real)
    assert bank.ok, bank.errors
    exercises = [q for q in bank.questions if q.is_exercise]
    assert len(exercises) >= 12
    for doc in exercises:
        assert doc.exercise is not None and doc.exercise.solution_code
        assert 1 <= len(doc.exercise.hints) <= 3
        assert any(e.hidden for e in doc.verify.expect), doc.slug
        assert any(not e.hidden for e in doc.verify.expect), doc.slug


def test_bank_check_accepts_a_bank_with_exercises(tmp_path: Path) -> None:
    """Exercises have no choices: the fairness rules about choices leave them out."""
    from typer.testing import CliRunner

    from app.cli import app

    both = tmp_path / "bank"
    shutil.copytree(Path(__file__).resolve().parents[1] / "fixtures" / "bank", both)
    shutil.copytree(EXERCISE_BANK / "drills", both / "drills")
    result = CliRunner().invoke(app, ["bank", "check", str(both)])
    assert result.exit_code == 0, result.output
    assert "all valid" in result.output


def test_every_bank_exercise_carries_known_wrong_solutions_that_are_mistakes_not_copies() -> None:
    real = Path(__file__).resolve().parents[2] / "question_bank"
    bank = load_bank(real)
    assert bank.ok, bank.errors
    for doc in (q for q in bank.questions if q.is_exercise):
        ex = doc.exercise
        assert ex is not None and len(ex.wrong) >= MIN_WRONG_SOLUTIONS, doc.slug
        for w in ex.wrong:
            assert w.code and w.why.strip(), (doc.slug, w.file)
            compile(w.code, w.file, "exec")
            assert w.code not in (ex.solution_code, doc.snippet_text), (doc.slug, w.file)
    ring = next(q for q in bank.questions if q.slug == "ring-allreduce-send-recv")
    assert ring.exercise is not None and "all_reduce" in ring.exercise.forbid


def test_wrong_solutions_and_forbid_load_and_round_trip(tmp_path: Path) -> None:
    bank_dir = _copy(tmp_path)
    _edit(bank_dir, {"exercise": {"forbid": ["broadcast"], "wrong": [
        {"file": "wrong_one.py", "why": "forgets the collective"}]}})
    (bank_dir / "drills" / "wrong_one.py").write_text("def rank_total():\n    return rank + 1\n")
    bank = load_bank(bank_dir)
    assert bank.ok, bank.errors
    (doc,) = bank.questions
    assert doc.exercise is not None and doc.exercise.forbid == ["broadcast"]
    (wrong,) = doc.exercise.wrong
    assert wrong.code == "def rank_total():\n    return rank + 1\n"
    out = tmp_path / "out"
    write_bank(out, bank.questions, bank.topics)
    written = yaml.safe_load((out / "drills" / "fixture-exercise.yaml").read_text())
    assert written["exercise"]["wrong"] == [{"file": "wrong_one.py", "why": "forgets the collective"}]
    assert load_bank(out).questions == bank.questions


def test_bad_wrong_solutions_forbid_and_reference_checks_are_refused_naming_the_field(
    tmp_path: Path,
) -> None:
    cases = [
        ({"exercise": {"wrong": [{"file": "missing.py", "why": "x"}]}},
         "exercise.wrong[0].file: file 'missing.py' not found"),
        ({"exercise": {"wrong": [{"file": "solution.py", "why": "x"}]}},
         "exercise.wrong[0].file"),
        ({"exercise": {"forbid": ["all_reduse"]}}, "exercise.forbid"),
    ]
    for change, message in cases:
        bank_dir = _copy(tmp_path / str(len(message)))
        _edit(bank_dir, change)
        assert any(message in m for m in _messages(bank_dir)), (change, _messages(bank_dir))
    bank_dir = _copy(tmp_path / "ref")
    path = bank_dir / "drills" / "fixture-exercise.yaml"
    data = yaml.safe_load(path.read_text())
    data["verify"]["expect"][0]["value"] = {"name": "total", "equals": 3, "reference": True}
    path.write_text(yaml.safe_dump(data))
    assert any("equals or reference" in m for m in _messages(bank_dir))
    data["verify"]["expect"][0]["value"] = {"name": "total"}
    path.write_text(yaml.safe_dump(data))
    assert any("needs equals" in m for m in _messages(bank_dir))
    (bank_dir / "drills" / "checks.py").write_text("report('x', 1)\n" + CHECKS_MARK)
    data["verify"]["expect"][0]["value"] = {"name": "total", "reference": True}
    path.write_text(yaml.safe_dump(data))
    assert any("exercise.harness" in m and "marks where the checks start" in m
               for m in _messages(bank_dir))


def test_reference_checks_are_for_exercises_only(tmp_path: Path) -> None:
    source = Path(__file__).resolve().parents[1] / "fixtures" / "bank"
    bank = tmp_path / "bank"
    shutil.copytree(source, bank)
    path = bank / "basics" / "fixture-single.yaml"
    data = yaml.safe_load(path.read_text())
    value = next(e for e in data["verify"]["expect"] if "value" in e)["value"]
    value.pop("equals")
    value["reference"] = True
    path.write_text(yaml.safe_dump(data))
    assert any("reference" in m and "a question has none" in m for m in _messages(bank))
