"""The question editor's form: every QuestionDoc field as the text an author types.

Simple fields are inputs; the nested ones (trace, knobs, audit, expectations) are
YAML text areas in exactly the bank file's format, so what an author learns in
the editor is what they read in question_bank/. `to_doc` validates with the same
model as the bank loader and names the form field of every error.
"""

from __future__ import annotations

import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml
from pydantic import ValidationError
from starlette.datastructures import FormData

from app.questions.bank import doc_from_data, doc_to_data, load_yaml
from app.questions.schema import FieldError, QuestionDoc

# Empty choice rows the editor offers below the existing ones.
SPARE_CHOICES = 2
# What a new question's expectations start as: the snippet at least finishes.
NEW_EXPECT = "- label: the run completes\n  outcome: ok\n"

# Which form field a validation error belongs to, by its location in the document.
_TOP_FIELDS = {"slug", "topic", "title", "tags", "difficulty", "type", "answer_format", "prompt",
               "explanation", "choices", "answer", "trace", "exercise", "explained",
               "variables", "variants", "compute", "parts", "model_answer", "rubric"}
# The editor's YAML text areas for the fields of questions with variables, cases and
# talk-throughs, in the bank file's own format.
_YAML_FIELDS = ("variables", "variants", "compute", "parts", "rubric")
# An exercise's author writes at most this many hints (schema.MAX_HINTS).
HINT_FIELDS = 3
_VERIFY_FIELDS = {"knobs": "knobs", "expect": "expect", "audit": "audit",
                  "world_size": "world_size", "timeout_s": "timeout_s", "snippet": "snippet_file"}


def _dump(value: Any) -> str:
    if value is None:
        return ""
    return yaml.dump(value, Dumper=_BlockDumper, sort_keys=False, allow_unicode=True, width=100)


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings (a wrong solution's code) as `|` blocks, readable in a textarea."""


def _str_block(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value and not value.startswith(" ") else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _str_block)


def textarea_value(value: Any) -> str:
    """A textarea's value with the browser's CRLF line ends made LF ("" for a file or nothing)."""
    text = value if isinstance(value, str) else ""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _loc_name(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


@dataclass
class ChoiceRow:
    text: str = ""
    correct: bool = False


# The longest text any editor field takes (a snippet is the largest); a bank file is
# capped at about this size too. Longer input is refused, not cut.
MAX_FIELD_CHARS = 64 * 1024
# Choice rows one question may have.
MAX_CHOICES = 26


@dataclass
class EditorForm:
    slug: str = ""
    topic: str = ""
    title: str = ""
    tags: str = ""
    difficulty: str = "2"
    type: str = "single"
    answer_format: str = ""
    prompt: str = ""
    explanation: str = ""
    choices: list[ChoiceRow] = field(default_factory=list)
    answer_value: str = ""
    # With variables, a numeric key is an expression (`answer.formula`), never a typed number.
    answer_formula: str = ""
    answer_unit: str = ""
    answer_abs_tol: str = ""
    answer_rel_tol: str = ""
    trace: str = ""
    snippet: str = ""
    snippet_file: str = ""
    world_size: str = "2"
    timeout_s: str = "10"
    knobs: str = ""
    audit: str = "default"
    expect: str = NEW_EXPECT
    # Exercises: the reference solution, the harness appended to every run, the hints.
    solution: str = ""
    solution_file: str = ""
    harness: str = ""
    harness_file: str = ""
    hints: list[str] = field(default_factory=lambda: [""] * HINT_FIELDS)
    # The collectives learner code may not call (comma-separated), the known-wrong solutions
    # the gate proves the checks reject and the other right solutions it proves they accept
    # (YAML lists of file, why, code), and whether the ranks share a folder.
    forbid: str = ""
    wrong: str = ""
    right: str = ""
    shared_folder: bool = False
    # Choices no measurement can decide, with the reason (YAML mapping: key -> reason).
    explained: str = ""
    # Questions with parameters: the variables, which combinations are variants, computed
    # names (YAML, as in the bank file). Cases: their parts (YAML list). Talk-throughs: the
    # model answer (markdown) and the rubric (YAML list of moves).
    variables: str = ""
    variants: str = ""
    compute: str = ""
    parts: str = ""
    model_answer: str = ""
    rubric: str = ""
    note: str = ""
    base_revision_id: str = ""
    errors: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def blank(cls, topic: str = "") -> EditorForm:
        return cls(topic=topic, choices=[ChoiceRow() for _ in range(4)])

    @classmethod
    def from_doc(cls, doc: QuestionDoc, *, base_revision_id: int | None = None) -> EditorForm:
        data = doc_to_data(doc)
        form = cls(
            slug=doc.slug, topic=doc.topic, title=doc.title, tags=", ".join(doc.tags),
            difficulty=str(doc.difficulty), type=doc.type, answer_format=doc.answer_format or "",
            prompt=doc.prompt, explanation=doc.explanation,
            choices=[ChoiceRow(c.text, c.correct) for c in doc.choices],
            trace=_dump(data.get("trace")), snippet=doc.snippet_text or "",
            explained=_dump(data.get("explained")) if doc.explained else "",
            base_revision_id=str(base_revision_id or ""),
            variables=_dump(data.get("variables")), variants=_dump(data.get("variants")),
            compute=_dump(data.get("compute")), parts=_dump(data.get("parts")),
            model_answer=doc.model_answer or "", rubric=_dump(data.get("rubric")),
        )
        if doc.answer is not None:
            # A formula question has no typed value: its key is computed per variant.
            form.answer_value = f"{doc.answer.value:g}" if doc.answer.value is not None else ""
            form.answer_formula = doc.answer.formula or ""
            form.answer_unit = doc.answer.unit
            form.answer_abs_tol = f"{doc.answer.abs_tol:g}" if doc.answer.abs_tol else ""
            form.answer_rel_tol = f"{doc.answer.rel_tol:g}" if doc.answer.rel_tol else ""
        if doc.verify is not None:
            v = data["verify"]
            form.snippet_file = doc.verify.snippet
            # A world_size variable sets each variant's ranks; the block then has none.
            form.world_size = "" if "world_size" in doc.variables else str(doc.verify.world_size)
            form.timeout_s = f"{doc.verify.timeout_s:g}"
            form.knobs = _dump(v.get("knobs"))
            audit = v.get("audit", "default")
            form.audit = audit if isinstance(audit, str) else _dump(audit)
            form.expect = _dump(v.get("expect"))
        else:
            form.expect = NEW_EXPECT
        if doc.exercise is not None:
            form.solution = doc.exercise.solution_code or ""
            form.solution_file = doc.exercise.solution
            form.harness = doc.exercise.harness_code or ""
            form.harness_file = doc.exercise.harness or ""
            form.hints = (list(doc.exercise.hints) + [""] * HINT_FIELDS)[:HINT_FIELDS]
            form.forbid = ", ".join(doc.exercise.forbid)
            form.wrong = _dump([{"file": w.file, "why": w.why, "code": w.code or ""}
                                for w in doc.exercise.wrong]) if doc.exercise.wrong else ""
            form.right = _dump([{"file": r.file, "why": r.why, "code": r.code or ""}
                                for r in doc.exercise.right]) if doc.exercise.right else ""
            form.shared_folder = doc.exercise.shared_folder
        form.choices += [ChoiceRow() for _ in range(SPARE_CHOICES)]
        return form

    @classmethod
    def from_form(cls, form: FormData) -> EditorForm:
        def get(name: str, default: str = "") -> str:
            value = form.get(name)
            return textarea_value(value) if isinstance(value, str) else default

        texts = [textarea_value(v) for v in form.getlist("choice_text") if isinstance(v, str)]
        correct = {v for v in form.getlist("choice_correct") if isinstance(v, str)}
        choices = [ChoiceRow(t, str(i) in correct) for i, t in enumerate(texts)]
        made = cls(
            slug=get("slug").strip(), topic=get("topic").strip(), title=get("title").strip(),
            tags=get("tags"), difficulty=get("difficulty", "2"), type=get("type", "single"),
            answer_format=get("answer_format"), prompt=get("prompt"), explanation=get("explanation"),
            choices=choices, answer_value=get("answer_value").strip(),
            answer_formula=get("answer_formula").strip(),
            answer_unit=get("answer_unit").strip(), answer_abs_tol=get("answer_abs_tol").strip(),
            answer_rel_tol=get("answer_rel_tol").strip(), trace=get("trace"),
            snippet=get("snippet"), snippet_file=get("snippet_file").strip(),
            world_size=get("world_size", "2").strip(), timeout_s=get("timeout_s", "10").strip(),
            knobs=get("knobs"), audit=get("audit", "default"), expect=get("expect"),
            solution=get("solution"), solution_file=get("solution_file").strip(),
            harness=get("harness"), harness_file=get("harness_file").strip(),
            hints=[get(f"hint_{i}") for i in range(1, HINT_FIELDS + 1)],
            forbid=get("forbid").strip(), wrong=get("wrong"), right=get("right"),
            shared_folder=get("shared_folder") == "on",
            explained=get("explained"),
            note=get("note").strip(), base_revision_id=get("base_revision_id").strip(),
            variables=get("variables"), variants=get("variants"), compute=get("compute"),
            parts=get("parts"), model_answer=get("model_answer"), rubric=get("rubric"),
        )
        for name, value in vars(made).items():
            if isinstance(value, str) and len(value) > MAX_FIELD_CHARS:
                made.error(name, f"is {len(value)} characters long; the limit is {MAX_FIELD_CHARS}")
                setattr(made, name, value[:MAX_FIELD_CHARS])
        if any(len(c.text) > MAX_FIELD_CHARS for c in choices):
            made.error("choices", f"a choice is longer than {MAX_FIELD_CHARS} characters")
            for c in choices:
                c.text = c.text[:MAX_FIELD_CHARS]
        if len([c for c in choices if c.text.strip()]) > MAX_CHOICES:
            made.error("choices", f"a question has at most {MAX_CHOICES} choices")
            made.choices = choices[:MAX_CHOICES]
        return made

    def with_spare_choices(self) -> EditorForm:
        filled = [c for c in self.choices if c.text.strip()]
        self.choices = filled + [ChoiceRow() for _ in range(SPARE_CHOICES)]
        return self

    def error(self, name: str, message: str) -> None:
        self.errors.setdefault(name, []).append(message)

    def _yaml(self, name: str, text: str) -> Any:
        if not text.strip():
            return None
        try:
            return load_yaml(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" (line {mark.line + 1})" if mark is not None else ""
            self.error(name, f"not valid YAML{where}: {getattr(exc, 'problem', None) or exc}")
            return None

    def _number(self, name: str, text: str, kind: Callable[[str], Any] = float) -> Any:
        if not text:
            return None
        try:
            return kind(text)
        except ValueError:
            self.error(name, f"{text!r} is not a number")
            return None

    def to_data(self) -> dict[str, Any]:
        """The bank document as a dict; problems found on the way are in `errors`."""
        data: dict[str, Any] = {
            "slug": self.slug, "topic": self.topic, "title": self.title,
            "tags": [t for t in self.tags.replace(",", " ").split() if t],
            "difficulty": self._number("difficulty", self.difficulty, int),
            "type": self.type, "prompt": self.prompt, "explanation": self.explanation,
        }
        if self.type == "trace":
            data["answer_format"] = self.answer_format or None
        for name in _YAML_FIELDS:
            value = self._yaml(name, getattr(self, name))
            if value is not None:
                data[name] = value
        fmt = self.answer_format if self.type == "trace" else self.type
        if fmt == "numeric":
            answer: dict[str, Any] = (
                {"formula": self.answer_formula} if self.answer_formula
                else {"value": self._number("answer", self.answer_value)})
            if self.answer_formula and self.answer_value:
                self.error("answer", "give the value or the formula, not both")
            if not self.answer_formula and answer["value"] is None and "answer" not in self.errors:
                self.error("answer", "a numeric question needs its answer (a value; with "
                                     "variables, a formula)")
            if self.answer_unit:
                answer["unit"] = self.answer_unit
            for key, text in (("abs_tol", self.answer_abs_tol), ("rel_tol", self.answer_rel_tol)):
                value = self._number("answer", text)
                if value is not None:
                    answer[key] = value
            data["answer"] = answer
        elif self.type == "exercise":
            data["exercise"] = self._exercise()
        elif self.type == "talk":
            data["model_answer"] = self.model_answer or None
            if not self.explanation.strip():
                data.pop("explanation")  # optional notes
        elif self.type == "case":
            pass  # the parts carry the choices and answers
        else:
            rows = [c for c in self.choices if c.text.strip()]
            data["choices"] = [{"key": string.ascii_lowercase[i] if i < 26 else "",
                                "text": c.text.strip(), "correct": c.correct}
                               for i, c in enumerate(rows)]
        trace = self._yaml("trace", self.trace)
        if trace is not None:
            data["trace"] = trace
        explained = self._yaml("explained", self.explained)
        if explained is not None:
            data["explained"] = explained
        if self.snippet.strip():
            try:
                compile(self.snippet, self.snippet_file or "snippet.py", "exec")
            except SyntaxError as exc:
                self.error("snippet", f"Python syntax error on line {exc.lineno}: {exc.msg}")
            verify: dict[str, Any] = {
                "snippet": self.snippet_file or f"{self.slug.replace('-', '_') or 'snippet'}.py",
                "world_size": self._number("world_size", self.world_size, int),
                "timeout_s": self._number("timeout_s", self.timeout_s),
            }
            if isinstance(data.get("variables"), dict) and "world_size" in data["variables"]:
                verify.pop("world_size")
            knobs = self._yaml("knobs", self.knobs)
            if knobs is not None:
                verify["knobs"] = knobs
            audit_text = self.audit.strip() or "default"
            verify["audit"] = audit_text if audit_text in ("default", "all") else self._yaml(
                "audit", audit_text)
            verify["expect"] = self._yaml("expect", self.expect) or []
            data["verify"] = {k: v for k, v in verify.items() if v is not None}
        return {k: v for k, v in data.items() if v is not None}

    def _exercise(self) -> dict[str, Any]:
        base = self.slug.replace("-", "_") or "exercise"
        out: dict[str, Any] = {"solution": self.solution_file or f"{base}_solution.py",
                               "hints": [h.strip() for h in self.hints if h.strip()]}
        if not self.solution.strip():
            self.error("exercise", "an exercise needs its reference solution")
        for name, code in (("solution", self.solution), ("harness", self.harness)):
            if not code.strip():
                continue
            try:
                compile(code, f"{name}.py", "exec")
            except SyntaxError as exc:
                self.error("exercise", f"{name}: Python syntax error on line {exc.lineno}: {exc.msg}")
        out["solution_code"] = self.solution
        forbid = [n.strip() for n in self.forbid.replace("\n", ",").split(",") if n.strip()]
        if forbid:
            out["forbid"] = forbid
        for kind, text in (("wrong", self.wrong), ("right", self.right)):
            listed = self._yaml(kind, text)
            if listed is None:
                continue
            if not isinstance(listed, list) or not all(isinstance(w, dict) for w in listed):
                self.error(kind, f"a YAML list of {kind} solutions, each with file, why and code")
                continue
            for i, w in enumerate(listed, 1):
                code = w.get("code")
                if not isinstance(code, str) or not code.strip():
                    self.error(kind, f"{kind} solution {i}: its code is missing")
                    continue
                try:
                    compile(code, str(w.get("file") or f"{kind}_{i}.py"), "exec")
                except SyntaxError as exc:
                    self.error(kind, f"{kind} solution {i}: Python syntax error on line "
                                     f"{exc.lineno}: {exc.msg}")
            out[kind] = listed
        if self.shared_folder:
            out["shared_folder"] = True
        if self.harness.strip():
            out["harness"] = self.harness_file or f"{base}_checks.py"
            out["harness_code"] = self.harness
        return out

    def to_doc(self) -> QuestionDoc | None:
        """The validated document, or None with `errors` filled in per field."""
        data = self.to_data()
        if self.errors:
            return None
        try:
            return doc_from_data(data, self.snippet if "verify" in data else None)
        except ValidationError as exc:
            for err in exc.errors():
                loc = tuple(err["loc"])
                if len(loc) > 1 and loc[0] == "trace" and loc[1] in ("rank_events", "buckets", "artifact"):
                    loc = loc[:1] + loc[2:]
                cause = err.get("ctx", {}).get("error")
                if isinstance(cause, FieldError):
                    loc += cause.loc
                msg = str(err["msg"]).removeprefix("Value error, ")
                name = "form"
                if loc and loc[0] in _TOP_FIELDS:
                    name = str(loc[0])
                elif len(loc) > 1 and loc[0] == "verify":
                    name = _VERIFY_FIELDS.get(str(loc[1]), "expect")
                elif loc and loc[0] == "verify":
                    name = "expect"
                self.error(name, f"{_loc_name(loc)}: {msg}" if loc else msg)
            return None

    @property
    def effective_format(self) -> str:
        return (self.answer_format or "single") if self.type == "trace" else self.type


def knob_choices(form: EditorForm) -> dict[str, list[Any]]:
    """The knobs the form declares (name -> allowed values), for the Run now controls."""
    try:
        knobs = load_yaml(form.knobs) if form.knobs.strip() else {}
    except yaml.YAMLError:
        return {}
    if not isinstance(knobs, dict):
        return {}
    out: dict[str, list[Any]] = {}
    for name, knob in knobs.items():
        if isinstance(knob, dict) and isinstance(knob.get("values"), list):
            values = list(knob["values"])
            default = knob.get("default")
            if default in values:
                values.remove(default)
                values.insert(0, default)
            out[str(name)] = values
    return out


def audit_including(audit_text: str, knobs_text: str, combo: dict[str, Any]) -> str | None:
    """The audit text with `combo` audited too, or None if it already is.

    `default` audits the knob defaults only, so it becomes a list of the defaults and
    `combo`; `all` already audits everything.
    """
    if not combo or audit_text.strip() == "all":
        return None
    knobs = load_yaml(knobs_text) if knobs_text.strip() else {}
    defaults = {name: k.get("default") for name, k in (knobs or {}).items() if isinstance(k, dict)}
    if audit_text.strip() == "default":
        listed: list[dict[str, Any]] = [defaults]
    else:
        loaded = load_yaml(audit_text)
        if not isinstance(loaded, list):
            raise ValueError("the audit must be default, all or a YAML list before one can be added")
        listed = loaded
    full = {**defaults, **combo}
    if any({**defaults, **(c or {})} == full for c in listed):
        return None
    return _dump([*listed, full])


def add_value_expectation(
    expect_text: str, *, name: str, rank: int, value: Any, when: dict[str, Any]
) -> str:
    """The expectations YAML with one more: `name` equals the measured value on `rank`."""
    current = load_yaml(expect_text) if expect_text.strip() else []
    if not isinstance(current, list):
        raise ValueError("the expectations must be a YAML list before one can be added")
    item: dict[str, Any] = {"label": f"{name} on rank {rank}"}
    if when:
        item["when"] = dict(when)
    item["value"] = {"name": name, "rank": rank, "equals": value}
    current.append(item)
    return _dump(current)
