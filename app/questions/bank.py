"""Reading and writing the bank as files, without touching the database.

`load_bank` returns every question and topic in a folder, or every problem it
found, each naming the file, the field and the line.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from app.questions.binding import key_binding_problems
from app.questions.facts import FACTS_FILE, FactsDoc
from app.questions.schema import FieldError, QuestionDoc, RightSolution, TopicDoc, WrongSolution
from app.verify.engine.forbid import CHECKS_MARK

TOPIC_FILE = "_topic.yaml"
# A question file larger than this is almost certainly a mistake (a pasted log).
MAX_FILE_BYTES = 256 * 1024
# libyaml's safe loader when PyYAML was built with it: much faster, same nodes and marks.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class BankError:
    file: str
    field: str
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        fld = f" [{self.field}]" if self.field else ""
        return f"{where}{fld}: {self.message}"


@dataclass
class Bank:
    questions: list[QuestionDoc] = field(default_factory=list)
    topics: dict[str, TopicDoc] = field(default_factory=dict)
    errors: list[BankError] = field(default_factory=list)
    # question_bank/_facts.yaml, when the bank has one (app.questions.facts).
    facts: FactsDoc | None = None

    @property
    def ok(self) -> bool:
        return not self.errors


def content_hash(doc: QuestionDoc) -> str:
    """A hash of everything a learner or the verifier sees; equal hashes mean no change."""
    payload: dict[str, Any] = {"doc": doc_to_data(doc), "snippet": doc.snippet_text}
    if doc.variables:
        # Sorted keys would hide a reordering, yet the order of the variables numbers the
        # variants and the order of compute is the order it is evaluated in.
        payload["order"] = [list(doc.variables), list(doc.compute)]
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def doc_to_data(doc: QuestionDoc) -> dict[str, Any]:
    """The JSON form of a question, without defaults, as stored and exported."""
    return doc.model_dump(mode="json", exclude_defaults=True, exclude={"snippet_text"})


def doc_from_data(data: dict[str, Any], snippet_text: str | None) -> QuestionDoc:
    doc = QuestionDoc.model_validate(data)
    return doc.model_copy(update={"snippet_text": snippet_text})


def _line_of(node: yaml.Node | None, loc: tuple[int | str, ...]) -> int | None:
    """The 1-based line of the deepest YAML node along a pydantic error location."""
    line = node.start_mark.line + 1 if node is not None else None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            match = next((v for k, v in node.value if k.value == part), None)
            if match is None:
                break
            node = match
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if part >= len(node.value):
                break
            node = node.value[part]
        else:
            break
        line = node.start_mark.line + 1
    return line


def _author_loc(loc: tuple[int | str, ...]) -> tuple[int | str, ...]:
    """The location as the author wrote it: without pydantic's tag for the kind of trace."""
    if len(loc) > 1 and loc[0] == "trace" and loc[1] in ("rank_events", "buckets", "artifact"):
        return loc[:1] + loc[2:]
    return loc


def _field_name(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def load_yaml(text: str) -> Any:
    """Parse bank YAML; anchors and aliases are refused (yaml.MarkedYAMLError).

    An alias repeats a node without repeating its text, so a few hundred bytes can
    expand to millions of values once the document is copied, validated or written
    back out. The bank never needs them.
    """
    for event in yaml.parse(text, Loader=_YAML_LOADER):
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise yaml.MarkedYAMLError(problem="anchors and aliases (& and *) are not allowed",
                                       problem_mark=event.start_mark)  # type: ignore[arg-type]
    return yaml.load(text, Loader=_YAML_LOADER)


def _read_yaml(path: Path, rel: str, errors: list[BankError]) -> tuple[Any, yaml.Node | None]:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            errors.append(BankError(rel, "", f"file is larger than {MAX_FILE_BYTES} bytes"))
            return None, None
        text = path.read_text(encoding="utf-8")
        data = load_yaml(text)
        node = yaml.compose(text, Loader=_YAML_LOADER)
    except UnicodeDecodeError:
        errors.append(BankError(rel, "", "file is not UTF-8 text"))
        return None, None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        errors.append(BankError(rel, "", f"not valid YAML: {problem}", line))
        return None, None
    return data, node


def _validation_errors(
    exc: ValidationError, rel: str, node: yaml.Node | None
) -> list[BankError]:
    out = []
    for err in exc.errors():
        loc = _author_loc(tuple(err["loc"]))
        cause = err.get("ctx", {}).get("error")
        if isinstance(cause, FieldError):
            loc += cause.loc
        msg = err["msg"].removeprefix("Value error, ")
        out.append(BankError(rel, _field_name(loc), msg, _line_of(node, loc)))
    return out


def load_question_file(
    path: Path, root: Path, fact_ids: set[str] | None = None
) -> tuple[QuestionDoc | None, list[BankError]]:
    """Parse and validate one question file and its snippet (and its fact ids, when given)."""
    rel = str(path.relative_to(root))
    errors: list[BankError] = []
    data, node = _read_yaml(path, rel, errors)
    if errors:
        return None, errors
    if not isinstance(data, dict):
        return None, [BankError(rel, "", "expected a mapping of fields at the top level", 1)]
    try:
        doc = QuestionDoc.model_validate(data)
    except ValidationError as exc:
        return None, _validation_errors(exc, rel, node)
    topic_dir = path.parent.name
    if doc.topic != topic_dir:
        errors.append(
            BankError(rel, "topic", f"is {doc.topic!r} but the file is in folder {topic_dir!r}",
                      _line_of(node, ("topic",)))
        )
    if doc.slug != path.stem:
        errors.append(
            BankError(rel, "slug", f"is {doc.slug!r} but the file is named {path.name!r}",
                      _line_of(node, ("slug",)))
        )
    # The answer key must agree with what the expectations measure (docs/question-format.md,
    # "Binding expectations to the key"); the gate then runs them, so a key that moved
    # without its expectations is caught here, before any run.
    for problem in key_binding_problems(doc):
        errors.append(BankError(rel, _field_name(problem.loc), str(problem), _line_of(node, problem.loc)))
    if fact_ids is not None and doc.verify is not None:
        for i, expectation in enumerate(doc.verify.expect):
            for j, fact_id in enumerate(expectation.facts):
                if fact_id not in fact_ids:
                    loc: tuple[int | str, ...] = ("verify", "expect", i, "facts", j)
                    errors.append(BankError(rel, _field_name(loc),
                                            f"fact {fact_id!r} is not in {FACTS_FILE}",
                                            _line_of(node, loc)))
    snippet_text = None
    if doc.verify is not None:
        snippet_path = path.parent / doc.verify.snippet
        if not snippet_path.is_file():
            errors.append(
                BankError(rel, "verify.snippet", f"file {doc.verify.snippet!r} not found beside it",
                          _line_of(node, ("verify", "snippet")))
            )
        else:
            snippet_text = snippet_path.read_text(encoding="utf-8")
            try:
                compile(snippet_text, str(snippet_path), "exec")
            except SyntaxError as exc:
                errors.append(
                    BankError(str(snippet_path.relative_to(root)), "verify.snippet",
                              f"Python syntax error: {exc.msg}", exc.lineno)
                )
    exercise_files: dict[str, Any] = {}
    if doc.exercise is not None:
        ex = doc.exercise
        for field_name in ("solution_code", "harness_code"):
            if getattr(ex, field_name) is not None:
                errors.append(BankError(rel, f"exercise.{field_name}",
                                        "is read from the file named beside it; do not write it",
                                        _line_of(node, ("exercise", field_name))))
        for field_name, file_name in (("solution", ex.solution), ("harness", ex.harness)):
            if file_name is None:
                continue
            code = _exercise_file(path, root, file_name, ("exercise", field_name), node, errors)
            if code is not None:
                exercise_files[f"{field_name}_code"] = code
        harness_code = exercise_files.get("harness_code")
        if harness_code is not None and CHECKS_MARK.strip() in harness_code:
            errors.append(BankError(rel, "exercise.harness",
                                    f"must not contain the line {CHECKS_MARK.strip()!r}: it marks "
                                    "where the checks start", _line_of(node, ("exercise", "harness"))))
        solutions: list[tuple[str, Sequence[WrongSolution | RightSolution]]] = [
            ("wrong", ex.wrong), ("right", ex.right)]
        for kind, listed in solutions:
            loaded = []
            for i, w in enumerate(listed):
                where: tuple[int | str, ...] = ("exercise", kind, i, "file")
                if w.code is not None:
                    errors.append(BankError(rel, _field_name(("exercise", kind, i, "code")),
                                            "is read from the file named beside it; do not write it",
                                            _line_of(node, ("exercise", kind, i))))
                code = _exercise_file(path, root, w.file, where, node, errors)
                loaded.append(w.model_copy(update={"code": code}))
            exercise_files[kind] = loaded
    if errors:
        return None, errors
    if doc.exercise is not None:
        doc = doc.model_copy(update={"exercise": doc.exercise.model_copy(update=exercise_files)})
    return doc.model_copy(update={"snippet_text": snippet_text}), []


def _exercise_file(path: Path, root: Path, file_name: str, loc: tuple[int | str, ...],
                   node: yaml.Node | None, errors: list[BankError]) -> str | None:
    """The text of a code file an exercise names beside its YAML, or None (with the error)."""
    rel = str(path.relative_to(root))
    code_path = path.parent / file_name
    if not code_path.is_file():
        errors.append(BankError(rel, _field_name(loc), f"file {file_name!r} not found beside it",
                                _line_of(node, loc)))
        return None
    code = code_path.read_text(encoding="utf-8")
    try:
        compile(code, str(code_path), "exec")
    except SyntaxError as exc:
        errors.append(BankError(str(code_path.relative_to(root)), _field_name(loc),
                                f"Python syntax error: {exc.msg}", exc.lineno))
    return code


def load_bank(root: Path) -> Bank:
    """Every topic and question under root, or the list of what is wrong with them."""
    bank = Bank()
    if not root.is_dir():
        bank.errors.append(BankError(str(root), "", "bank folder not found"))
        return bank
    facts_file = root / FACTS_FILE
    if facts_file.is_file():
        data, node = _read_yaml(facts_file, FACTS_FILE, bank.errors)
        if data is not None:
            try:
                bank.facts = FactsDoc.model_validate(data)
            except ValidationError as exc:
                bank.errors.extend(_validation_errors(exc, FACTS_FILE, node))
    fact_ids = bank.facts.ids if bank.facts is not None else None
    facts_node = node if bank.facts is not None else None
    seen: dict[str, str] = {}
    for topic_dir in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        topic_file = topic_dir / TOPIC_FILE
        rel_topic = str(topic_file.relative_to(root))
        if topic_file.exists():
            data, node = _read_yaml(topic_file, rel_topic, bank.errors)
            if data is not None:
                try:
                    bank.topics[topic_dir.name] = TopicDoc.model_validate(data)
                except ValidationError as exc:
                    bank.errors.extend(_validation_errors(exc, rel_topic, node))
        else:
            bank.topics[topic_dir.name] = TopicDoc(title=topic_dir.name.replace("-", " ").capitalize())
        for path in sorted(topic_dir.glob("*.yaml")):
            if path.name == TOPIC_FILE:
                continue
            doc, errors = load_question_file(path, root, fact_ids)
            bank.errors.extend(errors)
            if doc is None:
                continue
            rel = str(path.relative_to(root))
            if doc.slug in seen:
                bank.errors.append(
                    BankError(rel, "slug", f"{doc.slug!r} is also used by {seen[doc.slug]}", 1)
                )
                continue
            seen[doc.slug] = rel
            bank.questions.append(doc)
    if bank.facts is not None and not bank.errors:
        # A fact that names a deleted or misspelt question would silently drop from coverage.
        for i, section in enumerate(bank.facts.sections):
            for j, fact in enumerate(section.facts):
                for k, slug in enumerate(fact.questions):
                    if slug not in seen:
                        loc: tuple[int | str, ...] = ("sections", i, "facts", j, "questions", k)
                        bank.errors.append(BankError(FACTS_FILE, _field_name(loc),
                                                     f"fact {fact.id!r} names no question {slug!r}",
                                                     _line_of(facts_node, loc)))
    return bank


class _BlockDumper(yaml.SafeDumper):
    """Writes multi-line strings as literal blocks so exported files stay readable."""


def _str_representer(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_BlockDumper.add_representer(str, _str_representer)


def dump_question_yaml(doc: QuestionDoc) -> str:
    data = doc_to_data(doc)
    if isinstance(data.get("exercise"), dict):
        # The codes live in their own files (write_bank), as the author wrote them.
        data["exercise"].pop("solution_code", None)
        data["exercise"].pop("harness_code", None)
        for solution in [*data["exercise"].get("wrong", []), *data["exercise"].get("right", [])]:
            solution.pop("code", None)
    return yaml.dump(
        data, Dumper=_BlockDumper, sort_keys=False, allow_unicode=True, width=100
    )


def write_bank(
    root: Path, questions: list[QuestionDoc], topics: dict[str, TopicDoc]
) -> list[Path]:
    """Write questions (and their snippets) and topic files under root; returns the paths."""
    written = []
    for slug, topic in topics.items():
        folder = root / slug
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / TOPIC_FILE
        path.write_text(
            yaml.dump(topic.model_dump(mode="json"), Dumper=_BlockDumper, sort_keys=False,
                      allow_unicode=True)
        )
        written.append(path)
    for doc in questions:
        folder = root / doc.topic
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{doc.slug}.yaml"
        path.write_text(dump_question_yaml(doc), encoding="utf-8")
        written.append(path)
        if doc.verify is not None and doc.snippet_text is not None:
            snippet = folder / doc.verify.snippet
            snippet.write_text(doc.snippet_text, encoding="utf-8")
            written.append(snippet)
        ex = doc.exercise
        if ex is not None:
            files = [(ex.solution, ex.solution_code), (ex.harness, ex.harness_code),
                     *((w.file, w.code) for w in ex.wrong), *((r.file, r.code) for r in ex.right)]
            for file_name, code in files:
                if file_name is not None and code is not None:
                    (folder / file_name).write_text(code, encoding="utf-8")
                    written.append(folder / file_name)
    return written
