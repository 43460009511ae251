"""Question templates and expressions: Jinja2's sandbox, narrowed, with every result bounded.

A question with `variables` is a template over them (docs/question-format.md,
"Variables and variants"). Its texts are rendered and its expressions evaluated
here and nowhere else: downstream code only sees `QuestionDoc.render(i)`, a plain
document. This is the one module outside the web layer that imports jinja2
(pyproject.toml's import-linter contract allows it here alone): it renders
question text, not pages.

Bank files are data, not code, so a template may name the question's variables and
computed values and call a short list of arithmetic functions, nothing else. Each
template is parsed, and its syntax tree checked against a whitelist of node kinds,
names, functions and filters, before it is compiled. A timeout is no option inside
the web process, so instead every operation is bounded before it runs: integers
stay under 2**64, strings and lists under MAX_VALUE_SIZE, `range` under MAX_RANGE
numbers, a template under MAX_NODES syntax nodes and MAX_NESTING levels, a rendered
text under MAX_RENDERED_CHARS. Whatever an author writes, rendering ends quickly
with a value or a TemplateProblem.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache, partial, wraps
from itertools import product
from typing import Any

from jinja2 import StrictUndefined, TemplateSyntaxError, Undefined, nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.environment import Template
from jinja2.parser import Parser
from jinja2.sandbox import ImmutableSandboxedEnvironment

from app.planner.formulas import BANK_FUNCTIONS as PLANNER_FUNCTIONS
from app.questions.values import TEMPLATED_CHECK_FIELDS, describe_variant, same_value

Loc = tuple[str | int, ...]

# Integers beyond 64 bits are never a quantity in a question, and bounding them keeps
# every multiplication and power cheap (9**9**9 is refused before it is computed).
MAX_INT_BITS = 64
# A string counts its characters, a list its elements plus theirs: enough for any
# computed text or per-rank table, small enough that copying one is cheap.
MAX_VALUE_SIZE = 10_000
# `range` builds a list: at most this many numbers.
MAX_RANGE = 1_000
# A template's syntax tree; the longest prompt in the bank has a few dozen expressions.
MAX_NODES = 2_000
# Brackets nested deeper than this are no arithmetic anyone writes; the bound keeps
# Jinja's recursive parser and Python's compiler far from their recursion limits.
MAX_NESTING = 64
# A rendered text is at most the size of a whole bank file.
MAX_RENDERED_CHARS = 256 * 1024
# `fmt` widths and precisions: a table column, not a memory bomb.
MAX_FORMAT_WIDTH = 100
MAX_FORMAT_PRECISION = 50

# Jinja's own keywords and the names its templates bind implicitly: a variable named
# like one of these could not be referred to, or would shadow machinery.
RESERVED_NAMES = frozenset({
    "and", "or", "not", "in", "is", "if", "else", "true", "false", "none", "True", "False",
    "None", "loop", "self", "caller", "varargs", "kwargs", "super", "namespace", "result",
})
# A text is a template only when it has one of these; others are used verbatim.
_MARKS = ("{{", "{%", "{#")
# "{{ expression }}" and nothing else: a templated value (an expectation's `equals`).
_WHOLE_EXPRESSION = re.compile(r"\s*\{\{(?P<expr>.*)\}\}\s*", re.DOTALL)
# Python's format-spec grammar: [[fill]align][sign][z][#][0][width][grouping][.precision][type].
_FORMAT_SPEC = re.compile(
    r"(?:(?P<fill>.)?(?P<align>[<>=^]))?(?P<sign>[-+ ])?z?#?0?(?P<width>\d+)?[_,]?"
    r"(?:\.(?P<precision>\d+))?(?P<type>[bcdeEfFgGnosxX%])?", re.DOTALL)


class TemplateProblem(ValueError):
    """A template or expression that cannot be used, or failed for one variant; `loc` names
    the field (the caller adds it), the message says what is wrong in the author's terms."""

    def __init__(self, message: str, loc: Loc = ()) -> None:
        super().__init__(message)
        self.loc = loc


# ------------------------------------------------------------------ bounded values

def _size(value: Any, budget: int = MAX_VALUE_SIZE) -> int:
    """The value's size (characters and elements), counting no further than `budget` + 1."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, list | tuple | dict):
        total = len(value)
        items = value.items() if isinstance(value, dict) else ((None, v) for v in value)
        for key, item in items:
            if total > budget:
                break
            if key is not None:
                total += _size(key, budget - total)
            total += _size(item, budget - total)
        return total
    return 1


def bounded(value: Any) -> Any:
    """The value, if it is one a template may hold; TemplateProblem otherwise."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        if value.bit_length() > MAX_INT_BITS:
            raise TemplateProblem(f"a whole number of 2**{MAX_INT_BITS} or more (integers are capped)")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TemplateProblem(f"{value} is not a finite number")
        return value
    if isinstance(value, str | list | tuple | dict):
        if _size(value) > MAX_VALUE_SIZE:
            raise TemplateProblem(f"a value longer than {MAX_VALUE_SIZE} characters or elements")
        if isinstance(value, str):
            return value
        for item in value.values() if isinstance(value, dict) else value:
            bounded(item)
        return value
    raise TemplateProblem(f"a value of kind {type(value).__name__!r} is not allowed in a template")


def _json_value(value: Any) -> Any:
    """An expression's result as the document stores it: tuples become lists, dicts refused."""
    if isinstance(value, tuple | list):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        raise TemplateProblem("an expression must give a number, a boolean, a string or a list, "
                              "not a mapping")
    if value is None:
        raise TemplateProblem("the expression gives no value (none)")
    return bounded(value)


def _pow(left: Any, right: Any) -> Any:
    # The result has about right × log2|left| bits: refuse before computing it.
    if (isinstance(left, int) and isinstance(right, int) and right > 0 and abs(left) > 1
            and right * (abs(left).bit_length() - 1) > MAX_INT_BITS):
        raise TemplateProblem(f"{left} ** {right} is 2**{MAX_INT_BITS} or more (integers are capped)")
    try:
        return left ** right
    except OverflowError:
        raise TemplateProblem(f"{left!r} ** {right!r} is too large") from None


def _repeat(left: Any, right: Any) -> Any:
    seq, times = (left, right) if isinstance(left, str | list | tuple) else (right, left)
    if (isinstance(seq, str | list | tuple) and isinstance(times, int) and not isinstance(times, bool)
            and times > 0 and _size(seq) * times > MAX_VALUE_SIZE):
        raise TemplateProblem(f"repeating a value {times} times makes it longer than "
                              f"{MAX_VALUE_SIZE} characters or elements")
    return left * right


def _mod(left: Any, right: Any) -> Any:
    if isinstance(left, str):
        # printf-style formatting takes field widths from the template: "%999999999d".
        raise TemplateProblem("'%' formatting of strings is not allowed; use the fmt filter")
    return left % right


_BINOPS: dict[str, Callable[[Any, Any], Any]] = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": _repeat, "/": lambda a, b: a / b,
    "//": lambda a, b: a // b, "%": _mod, "**": _pow,
}


def _arithmetic(values: tuple[Any, ...]) -> None:
    for v in values:
        if not isinstance(v, bool | int | float | str | list | tuple):
            raise TemplateProblem(f"arithmetic on a value of kind {type(v).__name__!r}")


# ------------------------------------------------------------------ functions and filters

def _range(*args: int) -> list[int]:
    for a in args:
        if not isinstance(a, int) or isinstance(a, bool):
            raise TemplateProblem("range takes whole numbers")
    numbers = range(*args)
    if len(numbers) > MAX_RANGE:
        raise TemplateProblem(f"range of {len(numbers)} numbers; at most {MAX_RANGE}")
    return list(numbers)


def _number_args(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(fn)
    def call(*args: Any) -> Any:
        for a in args:
            if not isinstance(a, int | float) or isinstance(a, bool):
                raise TemplateProblem(f"{name} takes numbers, not {type(a).__name__}")
        return fn(*args)
    return call


def _sum(values: Any, start: Any = 0) -> Any:
    items = list(values) if isinstance(values, list | tuple) else None
    if items is None or not all(isinstance(v, int | float) and not isinstance(v, bool)
                                for v in [*items, start]):
        raise TemplateProblem("sum takes a list of numbers")
    return sum(items, start)


def _convert(kind: type[int] | type[float]) -> Callable[[Any], Any]:
    def convert(value: Any) -> Any:
        if isinstance(value, str) and len(value) > 100:
            raise TemplateProblem(f"{kind.__name__}() of a string longer than 100 characters")
        if not isinstance(value, int | float | str):
            raise TemplateProblem(f"{kind.__name__}() takes a number or a string")
        return kind(value)
    convert.__name__ = kind.__name__
    return convert


def _minmax(fn: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(fn)
    def call(*args: Any) -> Any:
        if not args:
            raise TemplateProblem(f"{fn.__name__} needs a value")
        return fn(*args)
    return call


# The only callables a template may call (docs/question-format.md lists them).
FUNCTIONS: dict[str, Callable[..., Any]] = {
    "min": _minmax(min), "max": _minmax(max), "abs": _number_args("abs", abs),
    "round": _number_args("round", round), "ceil": _number_args("ceil", math.ceil),
    "floor": _number_args("floor", math.floor), "sqrt": _number_args("sqrt", math.sqrt),
    "log2": _number_args("log2", math.log2), "log10": _number_args("log10", math.log10),
    "sum": _sum, "len": len, "range": _range, "int": _convert(int), "float": _convert(float),
}


def _planner_function(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """One of the planner's formulas as a template function: numbers, booleans and strings
    in, and a wrong argument is the author's error, in their words."""
    @wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        for a in [*args, *kwargs.values()]:
            if not isinstance(a, int | float | str):
                raise TemplateProblem(f"{name} takes numbers, true/false and strings, not "
                                      f"{type(a).__name__}")
        try:
            return fn(*args, **kwargs)
        except (TypeError, ValueError) as exc:
            raise TemplateProblem(f"{name}: {exc}") from None
    return call


# The planner's formulas, by the names in app.planner.formulas.BANK_FUNCTIONS: a computed
# question whose arithmetic the planner covers calls them (docs/question-format.md, "The
# planner's functions"), so its key is the planner's answer.
FUNCTIONS.update({name: _planner_function(name, fn) for name, fn in PLANNER_FUNCTIONS.items()})
_FUNCTION_IDS = frozenset(id(f) for f in FUNCTIONS.values())


def fmt(value: Any, spec: str = "") -> str:
    """Python's format(value, spec), with the spec checked against the format-spec grammar."""
    if not isinstance(spec, str):
        raise TemplateProblem("fmt takes a format spec string, e.g. fmt(',.0f')")
    match = _FORMAT_SPEC.fullmatch(spec)
    if match is None:
        raise TemplateProblem(f"{spec!r} is not a format spec (e.g. ',.0f', '.2%', '>8')")
    if int(match["width"] or 0) > MAX_FORMAT_WIDTH:
        raise TemplateProblem(f"format width {match['width']} is over {MAX_FORMAT_WIDTH}")
    if int(match["precision"] or 0) > MAX_FORMAT_PRECISION:
        raise TemplateProblem(f"format precision {match['precision']} is over {MAX_FORMAT_PRECISION}")
    if not isinstance(value, int | float | str):
        raise TemplateProblem(f"fmt formats numbers and strings, not {type(value).__name__}")
    try:
        return format(value, spec)
    except ValueError as exc:
        raise TemplateProblem(f"fmt({spec!r}) of {value!r}: {exc}") from None


# Jinja's filters that cannot run long, reach attributes or give different results on
# each call. Left out: attr, map, select/reject(attr) (they reach attributes or other
# filters by name), format (printf widths), center, indent, wordwrap, truncate
# (widths), batch, slice, random (not deterministic), replace (multiplies length),
# sum (use the function), and the HTML and URL ones (the text is markdown).
ALLOWED_FILTERS = ("abs", "capitalize", "count", "d", "default", "first", "float", "int", "join",
                   "last", "length", "list", "lower", "max", "min", "reverse", "round", "sort",
                   "string", "title", "trim", "unique", "upper")


def _bounded_filter(fn: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        for a in [*args, *kwargs.values()]:
            if isinstance(a, str | list | tuple | dict | int | float):
                bounded(a)
        result = fn(*args, **kwargs)
        if isinstance(result, Iterator):
            result = list(result)  # reverse gives an iterator; it is no larger than its input
        return bounded(result)
    return call


# ------------------------------------------------------------------ the environment

def _finalize(value: Any) -> str:
    """What `{{ expression }}` prints: whole floats without ".0", other values as Python does."""
    if isinstance(value, Undefined):
        raise TemplateProblem("the expression gives no value")
    if value is None or isinstance(value, dict):
        raise TemplateProblem("a template prints numbers, booleans, strings or lists")
    value = bounded(value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return value if isinstance(value, str) else str(value)


class _BoundedCodeGenerator(CodeGenerator):
    """Compiles `a ~ b` to a bounded join: the sandbox cannot intercept concatenation."""

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.bounded_concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class _Sandbox(ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox with no attribute access, no calls but FUNCTIONS, and every
    arithmetic result bounded before it is made."""

    code_generator_class = _BoundedCodeGenerator
    intercepted_binops = frozenset(_BINOPS)
    intercepted_unops = frozenset({"+", "-"})

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        _arithmetic((left, right))
        if operator in ("/", "//", "%") and not isinstance(right, str | list | tuple) and right == 0:
            raise TemplateProblem("division by zero")
        try:
            return bounded(_BINOPS[operator](left, right))
        except TypeError:
            raise TemplateProblem(f"cannot apply {operator!r} to {type(left).__name__} and "
                                  f"{type(right).__name__}") from None

    def call_unop(self, context: Any, operator: str, arg: Any) -> Any:
        _arithmetic((arg,))
        try:
            return bounded(-arg if operator == "-" else +arg)
        except TypeError:
            raise TemplateProblem(f"cannot apply {operator!r} to {type(arg).__name__}") from None

    def getattr(self, obj: Any, attribute: str) -> Any:
        # `x.name` reads a mapping's item; objects have no attributes a template may see.
        if isinstance(obj, dict) and attribute in obj:
            return obj[attribute]
        raise TemplateProblem(f"attribute access (.{attribute}) is not allowed; templates read "
                              "list and mapping items only")

    def getitem(self, obj: Any, argument: Any) -> Any:
        if isinstance(obj, dict):
            if argument in obj:
                return obj[argument]
            raise TemplateProblem(f"no item {argument!r}")
        if isinstance(obj, list | tuple | str):
            ok = (isinstance(argument, int) and not isinstance(argument, bool)) or (
                isinstance(argument, slice) and all(
                    p is None or (isinstance(p, int) and not isinstance(p, bool))
                    for p in (argument.start, argument.stop, argument.step)))
            if not ok:
                raise TemplateProblem(f"a list or string is indexed by whole numbers, not {argument!r}")
            try:
                return obj[argument]
            except (IndexError, ValueError) as exc:
                raise TemplateProblem(f"index {argument!r}: {exc}") from None
        raise TemplateProblem(f"a value of kind {type(obj).__name__!r} has no items")

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        if id(__obj) not in _FUNCTION_IDS:
            raise TemplateProblem("only the listed functions may be called")
        for a in [*args, *kwargs.values()]:
            bounded(a)
        return bounded(__obj(*args, **kwargs))

    def bounded_concat(self, parts: tuple[Any, ...]) -> str:
        total, out = 0, []
        for part in parts:
            text = _finalize(part) if not isinstance(part, str) else part
            total += len(text)
            if total > MAX_VALUE_SIZE:
                raise TemplateProblem(f"joining with ~ makes a string longer than {MAX_VALUE_SIZE}")
            out.append(text)
        return "".join(out)


def _make_env() -> _Sandbox:
    # optimized=False: Jinja would otherwise fold constant expressions while compiling,
    # before any bound is checked.
    env = _Sandbox(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True,
                   optimized=False, finalize=_finalize, cache_size=0)
    env.globals.clear()
    env.globals.update(FUNCTIONS)
    default_filters = env.filters
    env.filters = {name: _bounded_filter(default_filters[name]) for name in ALLOWED_FILTERS}
    env.filters["fmt"] = _bounded_filter(fmt)
    return env


_ENV = _make_env()

# The syntax a template may use: {{ expressions }} over names, literals, arithmetic,
# comparisons, conditionals, items, calls of FUNCTIONS and filters.
_ALLOWED_NODES: tuple[type[nodes.Node], ...] = (
    nodes.Template, nodes.Output, nodes.TemplateData, nodes.Name, nodes.Const, nodes.List,
    nodes.Tuple, nodes.Dict, nodes.Pair, nodes.Getitem, nodes.Getattr, nodes.Slice, nodes.BinExpr,
    nodes.UnaryExpr, nodes.Compare, nodes.Operand, nodes.CondExpr, nodes.Call, nodes.Keyword,
    nodes.Filter, nodes.Test, nodes.Concat,
)
def _nesting(source: str) -> int:
    depth = deepest = 0
    for ch in source:
        if ch in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in ")]}":
            depth = max(0, depth - 1)
    return deepest


def _check_tree(tree: nodes.Node) -> frozenset[str]:
    """The names the tree reads; TemplateProblem for any syntax outside the whitelist."""
    found: list[nodes.Node] = []
    stack: list[nodes.Node] = [tree]
    while stack:
        node = stack.pop()
        found.append(node)
        if len(found) > MAX_NODES:
            raise TemplateProblem(f"more than {MAX_NODES} syntax nodes; split the text")
        stack.extend(node.iter_child_nodes())
    # Statements first: "no {% for %}" says more than whatever the loop's body calls.
    if any(isinstance(n, nodes.Stmt) and not isinstance(n, nodes.Output) for n in found):
        raise TemplateProblem("statements ({% ... %}) are not allowed in question templates; "
                              "only {% raw %}...{% endraw %} to quote braces")
    # Then a reach for Python's internals, the usual first step of an escape.
    private = next((n for n in found if isinstance(n, nodes.Getattr) and n.attr.startswith("_")), None)
    if private is not None:
        raise TemplateProblem(f"attribute access (.{private.attr}) is not allowed")
    callees = {id(n.node) for n in found if isinstance(n, nodes.Call)}
    names: set[str] = set()
    for node in found:
        if not isinstance(node, _ALLOWED_NODES):
            raise TemplateProblem(f"{type(node).__name__} is not allowed in question templates")
        if isinstance(node, nodes.Call | nodes.Filter | nodes.Test) and (
                node.dyn_args is not None or node.dyn_kwargs is not None):
            raise TemplateProblem("*args and **kwargs are not allowed")
        if isinstance(node, nodes.Call) and (
                not isinstance(node.node, nodes.Name) or node.node.name not in FUNCTIONS):
            raise TemplateProblem("only these functions may be called: " + ", ".join(FUNCTIONS))
        if isinstance(node, nodes.Name) and id(node) not in callees:
            if node.name in FUNCTIONS:
                raise TemplateProblem(f"{node.name} is a function: call it, {node.name}(...)")
            names.add(node.name)
    return frozenset(names)


@dataclass(frozen=True)
class Compiled:
    """A checked, compiled template or expression and the names it reads."""

    source: str
    names: frozenset[str]
    template: Template

    def run(self, values: dict[str, Any]) -> Any:
        missing = sorted(self.names - set(values))
        if missing:
            raise TemplateProblem(f"unknown name {missing[0]!r}")
        try:
            return self._generate(values)
        except TemplateProblem:
            raise
        except RecursionError:
            raise TemplateProblem("nested too deeply") from None
        except Exception as exc:  # the author's arithmetic: division, types, math domain errors
            raise TemplateProblem(_message(exc)) from None

    def _generate(self, values: dict[str, Any]) -> Any:
        raise NotImplementedError


class _CompiledText(Compiled):
    def _generate(self, values: dict[str, Any]) -> str:
        total, out = 0, []
        for chunk in self.template.generate(values):
            total += len(chunk)
            if total > MAX_RENDERED_CHARS:
                raise TemplateProblem(f"the rendered text is longer than {MAX_RENDERED_CHARS} characters")
            out.append(chunk)
        return "".join(out)


class _CompiledExpression(Compiled):
    def _generate(self, values: dict[str, Any]) -> Any:
        # What jinja2's TemplateExpression does: run the body, read the assigned result.
        context = self.template.new_context(dict(values))
        for _ in self.template.root_render_func(context):
            pass
        return _json_value(context.vars["result"])


def _message(exc: BaseException) -> str:
    if isinstance(exc, TemplateSyntaxError):
        return f"template syntax error: {exc.message}"
    text = str(exc) or type(exc).__name__
    return text.removeprefix("jinja2.exceptions.")


def _parse_guard(source: str) -> None:
    if _nesting(source) > MAX_NESTING:
        raise TemplateProblem(f"brackets nested more than {MAX_NESTING} deep")


@lru_cache(maxsize=4096)
def compile_template(source: str) -> Compiled:
    """A text as a checked template (cached by its source: compiling costs far more than
    rendering, and equal sources compile alike)."""
    _parse_guard(source)
    try:
        tree = _ENV.parse(source)
        names = _check_tree(tree)
        template = _ENV.from_string(tree)
    except TemplateProblem:
        raise
    except RecursionError:
        raise TemplateProblem("nested too deeply") from None
    except Exception as exc:
        raise TemplateProblem(_message(exc)) from None
    return _CompiledText(source, names, template)


@lru_cache(maxsize=4096)
def compile_expression(source: str) -> Compiled:
    """An expression (`compute`, `exclude`, `formula`, `correct_when`) as a checked, compiled
    one (cached like compile_template)."""
    _parse_guard(source)
    try:
        parser = Parser(_ENV, source, state="variable")
        expr = parser.parse_expression()
        if not parser.stream.eos:
            raise TemplateProblem(f"unexpected {parser.stream.current.value!r} after the expression")
        names = _check_tree(expr)
        body = [nodes.Assign(nodes.Name("result", "store"), expr, lineno=1)]
        template = _ENV.from_string(nodes.Template(body, lineno=1))
    except TemplateProblem:
        raise
    except RecursionError:
        raise TemplateProblem("nested too deeply") from None
    except Exception as exc:
        raise TemplateProblem(_message(exc)) from None
    return _CompiledExpression(source, names, template)


def is_template(text: str) -> bool:
    """True when the text has template syntax; other texts are used as written."""
    return any(mark in text for mark in _MARKS)


def whole_expression(text: Any) -> str | None:
    """The expression of a text that is exactly one `{{ expression }}`, else None."""
    if not isinstance(text, str):
        return None
    match = _WHOLE_EXPRESSION.fullmatch(text)
    if match is None or "}}" in match["expr"] or "{{" in match["expr"]:
        return None
    return match["expr"].strip()


def render_text(source: str, values: dict[str, Any]) -> str:
    """A text rendered with these values (as written when it has no template syntax)."""
    if not is_template(source):
        return source
    return str(compile_template(source).run(values))


def evaluate(source: str, values: dict[str, Any]) -> Any:
    """An expression's value: a finite number, a boolean, a string or a (nested) list."""
    return compile_expression(source).run(values)


# ------------------------------------------------------------------ arithmetic forms

# An expression's arithmetic in a canonical form, for rules about what a formula computes
# (app.questions.covered): ("c", number), ("n", name), ("sum", terms), ("prod", factors),
# ("inv", x), ("call", name, args), ("other",). Sums and products are flattened and their
# terms sorted, a division is a product with the divisor inverted, and constants are kept as
# written (6 * n * d keeps its 6).
Canon = tuple[Any, ...]
OTHER: Canon = ("other",)


def _canon_key(c: Canon) -> str:
    return repr(c)


def _canon_sum(terms: list[Canon]) -> Canon:
    flat: list[Canon] = []
    for t in terms:
        flat.extend(t[1] if t[0] == "sum" else (t,))
    return ("sum", tuple(sorted(flat, key=_canon_key)))


def _canon_prod(factors: list[Canon]) -> Canon:
    flat: list[Canon] = []
    for f in factors:
        flat.extend(f[1] if f[0] == "prod" else (f,))
    return ("prod", tuple(sorted(flat, key=_canon_key)))


def _canon_inv(c: Canon) -> Canon:
    if c[0] == "prod":
        return _canon_prod([_canon_inv(f) for f in c[1]])
    if c[0] == "inv":
        return c[1]
    return ("inv", c)


def _canon_neg(c: Canon) -> Canon:
    return ("c", -c[1]) if c[0] == "c" else _canon_prod([("c", -1), c])


def _canon(node: nodes.Node) -> Canon:
    if isinstance(node, nodes.Const) and isinstance(node.value, int | float) and not isinstance(
            node.value, bool):
        return ("c", node.value)
    if isinstance(node, nodes.Name):
        return ("n", node.name)
    if isinstance(node, nodes.Add):
        return _canon_sum([_canon(node.left), _canon(node.right)])
    if isinstance(node, nodes.Sub):
        return _canon_sum([_canon(node.left), _canon_neg(_canon(node.right))])
    if isinstance(node, nodes.Mul):
        return _canon_prod([_canon(node.left), _canon(node.right)])
    if isinstance(node, nodes.Div):
        return _canon_prod([_canon(node.left), _canon_inv(_canon(node.right))])
    if isinstance(node, nodes.Neg):
        return _canon_neg(_canon(node.node))
    if isinstance(node, nodes.Pos):
        return _canon(node.node)
    if isinstance(node, nodes.Call) and isinstance(node.node, nodes.Name):
        return ("call", node.node.name, tuple(_canon(a) for a in node.args))
    return OTHER


def arithmetic_forms(source: str) -> list[Canon]:
    """The canonical form of an expression and of each expression inside it (empty if it does
    not parse: compile_expression reports that)."""
    _parse_guard(source)
    try:
        tree = Parser(_ENV, source, state="variable").parse_expression()
    except Exception:
        return []
    forms = [_canon(node) for node in [tree, *tree.find_all(nodes.Expr)]]
    return [c for c in forms if c != OTHER]


# ------------------------------------------------------------------ variants

# Combinations beyond this are not enumerated to apply `exclude`: such a question must
# `pick` its variants (there may be at most MAX_VARIANTS of them anyway).
MAX_COMBINATIONS = 1024


def _assignments(variables: dict[str, list[Any]], exclude: str | None,
                 pick: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    names = list(variables)
    if pick is not None:
        return [{n: next(v for v in variables[n] if same_value(v, p[n])) for n in names}
                for p in pick]
    count = math.prod(len(variables[n]) for n in names)
    if count > MAX_COMBINATIONS:
        raise TemplateProblem(f"{count} combinations of values; list the variants under "
                              "variants.pick", ("variants",))
    out: list[dict[str, Any]] = []
    for combo in product(*(variables[n] for n in names)):
        params = dict(zip(names, combo, strict=True))
        if exclude is not None:
            try:
                dropped = evaluate(exclude, params)
            except TemplateProblem as exc:
                raise TemplateProblem(f"{describe_variant(len(out), params)}: {exc}",
                                      ("variants", "exclude")) from None
            if not isinstance(dropped, bool):
                raise TemplateProblem(f"exclude must be true or false, got {dropped!r}",
                                      ("variants", "exclude"))
            if dropped:
                continue
        out.append(params)
    return out


@lru_cache(maxsize=1024)
def _assignments_cached(key: str) -> tuple[dict[str, Any], ...]:
    variables, exclude, pick = json.loads(key)
    return tuple(_assignments(variables, exclude, pick))


def assignments(variables: dict[str, list[Any]], exclude: str | None = None,
                pick: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Every variant's values in variant order: all combinations (itertools.product over the
    variables as written) less those `exclude` drops, or exactly `pick`."""
    # Keyed by the JSON text, in order: a question's variants are listed once per process.
    key = json.dumps([variables, exclude, pick], separators=(",", ":"))
    return [dict(p) for p in _assignments_cached(key)]


def values_of(params: dict[str, Any], compute: dict[str, str]) -> dict[str, Any]:
    """The names a variant's templates see: its variables, then each computed name in order."""
    values = dict(params)
    for name, source in compute.items():
        try:
            values[name] = evaluate(source, values)
        except TemplateProblem as exc:
            raise TemplateProblem(str(exc), ("compute", name)) from None
    return values


# ------------------------------------------------------------------ documents

# What a template site gives: a text, true/false (correct_when), a number (formula), or
# any value (an expectation's templated `equals`, `count`, ...).
TEXT, BOOL, NUMBER, VALUE = "text", "bool", "number", "value"


@dataclass(frozen=True)
class Site:
    """One templated place in a question's JSON form."""

    loc: Loc
    kind: str
    source: str


def _text_sites(container: Any, loc: Loc, keys: tuple[str, ...]) -> Iterator[Site]:
    if not isinstance(container, dict):
        return
    for key in keys:
        value = container.get(key)
        if isinstance(value, str):
            yield Site((*loc, key), TEXT, value)


def _list_sites(values: Any, loc: Loc) -> Iterator[Site]:
    if isinstance(values, list):
        for i, v in enumerate(values):
            if isinstance(v, str):
                yield Site((*loc, i), TEXT, v)


def _choice_sites(part: dict[str, Any], loc: Loc) -> Iterator[Site]:
    """The sites a question and a case part share: choices, answer, explained."""
    for i, choice in enumerate(part.get("choices") or []):
        yield from _text_sites(choice, (*loc, "choices", i), ("text",))
        if isinstance(choice, dict) and isinstance(choice.get("correct_when"), str):
            yield Site((*loc, "choices", i, "correct_when"), BOOL, choice["correct_when"])
    answer = part.get("answer")
    if isinstance(answer, dict) and isinstance(answer.get("formula"), str):
        yield Site((*loc, "answer", "formula"), NUMBER, answer["formula"])
    explained = part.get("explained")
    if isinstance(explained, dict):
        yield from _text_sites(explained, (*loc, "explained"), tuple(explained))


def sites(data: dict[str, Any]) -> Iterator[Site]:
    """Every template in a question's JSON form (docs/question-format.md lists them)."""
    yield from _text_sites(data, (), ("prompt", "explanation", "model_answer"))
    yield from _list_sites(data.get("rubric"), ("rubric",))
    yield from _choice_sites(data, ())
    trace = data.get("trace")
    if isinstance(trace, dict):
        yield from _text_sites(trace, ("trace",), ("caption", "note_heading"))
        yield from _list_sites(trace.get("columns"), ("trace", "columns"))
        for i, step in enumerate(trace.get("steps") or []):
            yield from _text_sites(step, ("trace", "steps", i), ("step", "note"))
            if isinstance(step, dict):
                yield from _list_sites(step.get("cells"), ("trace", "steps", i, "cells"))
        for i, bucket in enumerate(trace.get("buckets") or []):
            yield from _text_sites(bucket, ("trace", "buckets", i), ("name",))
        source = trace.get("source")
        if isinstance(source, dict):
            yield from _text_sites(source, ("trace", "source"), ("note",))
    for j, part in enumerate(data.get("parts") or []):
        if isinstance(part, dict):
            yield from _text_sites(part, ("parts", j), ("prompt", "explanation"))
            yield from _choice_sites(part, ("parts", j))
            branches = part.get("branches")
            for key, branch in branches.items() if isinstance(branches, dict) else ():
                if isinstance(branch, dict):
                    yield from _text_sites(branch, ("parts", j, "branches", key), ("prompt", "explanation"))
                    yield from _choice_sites(branch, ("parts", j, "branches", key))
    verify = data.get("verify")
    for i, exp in enumerate(verify.get("expect") or [] if isinstance(verify, dict) else []):
        if not isinstance(exp, dict):
            continue
        yield from _text_sites(exp, ("verify", "expect", i), ("label",))
        for check, fields in TEMPLATED_CHECK_FIELDS.items():
            body = exp.get(check)
            if not isinstance(body, dict):
                continue
            for name in fields:
                value = body.get(name)
                if isinstance(value, str) and is_template(value):
                    # Not one whole expression: check_sources refuses it by its loc.
                    yield Site(("verify", "expect", i, check, name), VALUE,
                               whole_expression(value) or value)


def _compiled(site: Site) -> Compiled | None:
    if site.kind == TEXT:
        return compile_template(site.source) if is_template(site.source) else None
    return compile_expression(site.source)


def check_sources(data: dict[str, Any]) -> list[TemplateProblem]:
    """Every template and expression that cannot compile, or names what it may not (static:
    the same for every variant)."""
    variables = data.get("variables") or {}
    compute = data.get("compute") or {}
    problems: list[TemplateProblem] = []

    def check(loc: Loc, allowed: set[str], compiled: Callable[[], Compiled | None]) -> None:
        try:
            done = compiled()
        except TemplateProblem as exc:
            problems.append(TemplateProblem(str(exc), loc))
            return
        unknown = sorted(done.names - allowed) if done is not None else []
        if unknown:
            problems.append(TemplateProblem(f"unknown name {unknown[0]!r} (names here: "
                                            f"{', '.join(sorted(allowed)) or 'none'})", loc))

    known = set(variables)
    for name, source in compute.items():
        if isinstance(source, str):
            check(("compute", name), set(known), partial(compile_expression, source))
        known.add(name)
    variants = data.get("variants")
    if isinstance(variants, dict) and isinstance(variants.get("exclude"), str):
        check(("variants", "exclude"), set(variables), partial(compile_expression, variants["exclude"]))
    for site in sites(data):
        if site.kind == VALUE and whole_expression(site.source) is None and is_template(site.source):
            problems.append(TemplateProblem("a templated check value is exactly one "
                                            "{{ expression }}, with nothing around it", site.loc))
            continue
        check(site.loc, known, partial(_compiled, site))
    return problems


def _set(data: Any, loc: Loc, value: Any) -> None:
    for part in loc[:-1]:
        data = data[part]
    data[loc[-1]] = value


def render_data(data: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """The JSON form with every template rendered with these values: texts rendered, formulas
    become `value`, `correct_when` becomes `correct`, templated check fields their values."""
    out = json.loads(json.dumps(data))
    for site in sites(data):
        try:
            if site.kind == TEXT:
                _set(out, site.loc, render_text(site.source, values))
                continue
            result = evaluate(site.source, values)
        except TemplateProblem as exc:
            raise TemplateProblem(str(exc), site.loc) from None
        if site.kind == BOOL:
            if not isinstance(result, bool):
                raise TemplateProblem(f"correct_when must be true or false, got {result!r}", site.loc)
            choice = out
            for part in site.loc[:-1]:
                choice = choice[part]
            del choice["correct_when"]
            choice["correct"] = result
        elif site.kind == NUMBER:
            if isinstance(result, bool) or not isinstance(result, int | float):
                raise TemplateProblem(f"the formula gives {result!r}, not a number", site.loc)
            answer = out
            for part in site.loc[:-1]:
                answer = answer[part]
            del answer["formula"]
            answer["value"] = result
        else:
            _set(out, site.loc, result)
    return out
