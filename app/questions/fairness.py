"""Can an answer be picked without knowing it? Rules over the bank's choices and prompts.

Pure functions over loaded questions; `ddpdrill bank check` prints their findings
(docs/question-format.md, "Fairness"). A warning names one question a reviewer
should look at; an error is a bank-wide pattern (or a giveaway no question may have)
that fails the check.

Every single-answer item counts: single-answer questions, traces answered with one
choice, and the single-answer parts of cases. A test-taker reads a case part like any
other question, so its key must hide as well.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import combinations, pairwise
from typing import Any

from app.questions.schema import QuestionDoc

# A test-taker who always picks the longest choice should win at most about a third of
# the time: with four choices chance is 25%, and some keys are longest by nature.
MAX_LONGEST_KEY_SHARE = 0.35
# Every other length rank (second longest, third, ..., shortest) is bounded too: when
# only the longest was, keys drifted to second-longest (41% of the bank), which a
# test-taker exploits as easily.
MAX_OTHER_RANK_SHARE = 0.40
# And the longest and the shortest choice must each be the key now and then: a bank that
# never lets the longest (or shortest) win teaches "strike it out", which lifts a guess
# among four from 25% to a third.
MIN_EDGE_RANK_SHARE = 0.15
# With four choices a position is right 25% of the time by chance; above 40% a learner
# gains by guessing that letter.
MAX_POSITION_SHARE = 0.40
# A key that alone repeats the prompt's words most is picked by matching words; chance is
# about a quarter (ties excluded), so above this the bank has a habit.
MAX_ECHO_SHARE = 0.35
# A key this much longer than the longest other choice (or this much shorter than the
# shortest) stands out on its own page, whatever the bank-wide shares.
OUTLIER_LONGER = 1.25
OUTLIER_SHORTER = 0.8
# A multi-answer question with more right choices than this rewards ticking everything
# (scoring is right picks minus wrong picks).
MAX_MULTI_CORRECT = 3
# Below this many single-answer items, shares (length ranks, key position, echo) are
# noise, not habit: two questions of which one has a long key are not a pattern.
MIN_QUESTIONS_FOR_SHARE_RULES = 12
# Two prompts sharing this share of their word pairs (Jaccard of word bigrams) say the
# same thing: a reworded copy keeps about half its pairs, while distinct questions on
# one topic in this bank share under 20%.
NEAR_DUPLICATE_JACCARD = 0.5
# Prompts with fewer word pairs than this are too short to compare fairly.
MIN_PROMPT_PAIRS = 8
# A key that alone qualifies its claim ("usually", "can") is picked by test-taking habit:
# real behaviour is hedged, so the hedged choice looks like the careful one. Whole words,
# any case; docs/question-format.md, "Fairness".
HEDGE_WORDS = ("usually", "typically", "generally", "often", "may", "might", "can", "could",
               "sometimes", "tends", "likely", "mostly", "in most cases", "depends")
_HEDGE = re.compile(r"(?<![\w'’])(?:" + "|".join(w.replace(" ", r"\s+") for w in HEDGE_WORDS)
                    + r")(?![\w'’])", re.IGNORECASE)
# A choice about the other choices ("all of the above") is either the key by construction
# or a throwaway; neither tests the fact.
_ABOUT_CHOICES = re.compile(r"\b(?:all|none|both|neither|either)\s+of\s+(?:the\s+)?"
                            r"(?:above|these|those|others|other\s+(?:choices|answers|options))\b",
                            re.IGNORECASE)
# Words too common to say that a choice repeats its prompt.
_COMMON = frozenset((
    "about", "after", "also", "because", "been", "before", "being", "both", "does", "each", "from",
    "have", "into", "more", "most", "only", "other", "over", "some", "such", "than", "that", "their",
    "them", "then", "there", "these", "they", "this", "those", "under", "were", "what", "when",
    "where", "which", "while", "will", "with", "would", "your"))
# Two computed keys are the same number when they agree to this many significant digits.
KEY_DIGITS = 6
# A same-computation match needs this many input values: one shared number and an equal
# key is a coincidence, two or more with an equal key is the same exercise.
MIN_SHARED_INPUTS = 2
_NUMBER = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![\w.])\d+(?:\.\d+)?")


@dataclass(frozen=True)
class Finding:
    rule: str
    message: str
    file: str = ""

    def __str__(self) -> str:
        where = f"{self.file}: " if self.file else ""
        return f"{where}{self.message} [{self.rule}]"


@dataclass(frozen=True)
class Item:
    """One thing a learner answers: a question, or one part of a case (`where` names it)."""

    doc: QuestionDoc
    where: str
    prompt: str

    @property
    def file(self) -> str:
        return question_file(self.doc)

    def name(self, text: str) -> str:
        return f"{self.where}{text}" if self.where else text


@dataclass
class FairnessReport:
    warnings: list[Finding] = field(default_factory=list)
    errors: list[Finding] = field(default_factory=list)
    # Numbers behind the bank-wide rules, for printing.
    single_count: int = 0
    # Single-answer items per length rank of their key: 1 when no choice is longer.
    rank_counts: dict[int, int] = field(default_factory=dict)
    # Single-answer items whose key has no shorter choice.
    shortest_count: int = 0
    # Single-answer items whose key alone repeats the most of the prompt's words.
    echo_count: int = 0
    positions: dict[str, int] = field(default_factory=dict)
    multi_correct_counts: dict[str, int] = field(default_factory=dict)
    same_computations: int = 0

    def share(self, n: int) -> float:
        return n / self.single_count if self.single_count else 0.0

    @property
    def longest_key_count(self) -> int:
        return self.rank_counts.get(1, 0)

    def summary(self) -> str:
        ranks = ", ".join(f"{_rank_name(r)} {n} ({self.share(n):.0%})"
                          for r, n in sorted(self.rank_counts.items()))
        pos = ", ".join(f"{k}: {n}" for k, n in sorted(self.positions.items()))
        spread = Counter(self.multi_correct_counts.values())
        multi = ", ".join(f"{n} right: {q}" for n, q in sorted(spread.items()))
        return (
            f"{self.single_count} single-answer questions and case parts; the key's length rank: "
            f"{ranks or 'none'} (longest {MIN_EDGE_RANK_SHARE:.0%}-{MAX_LONGEST_KEY_SHARE:.0%}, "
            f"others at most {MAX_OTHER_RANK_SHARE:.0%}); key is the shortest choice in "
            f"{self.shortest_count} ({self.share(self.shortest_count):.0%}, "
            f"{MIN_EDGE_RANK_SHARE:.0%}-{MAX_OTHER_RANK_SHARE:.0%}); key alone echoes the prompt most in "
            f"{self.echo_count} ({self.share(self.echo_count):.0%}, at most {MAX_ECHO_SHARE:.0%}); "
            f"key positions: {pos or 'none'}; multi-answer questions with {multi or 'none'}; "
            f"same computations across questions: {self.same_computations}"
        )


def _rank_name(rank: int) -> str:
    return {1: "longest", 2: "2nd", 3: "3rd"}.get(rank, f"{rank}th")


def question_file(doc: QuestionDoc) -> str:
    return f"{doc.topic}/{doc.slug}.yaml"


def _length(text: str) -> int:
    """A choice's length as a reader sees it: spacing and line breaks do not count."""
    return len(" ".join(text.split()))


def items(doc: QuestionDoc) -> Iterator[Item]:
    """What a learner answers in a rendered question: itself, or each part of a case."""
    if doc.is_exercise or doc.is_talk:
        return
    if doc.is_case:
        for j in range(len(doc.parts)):
            for key, part in doc.part_versions(j):
                where = f"parts[{j}] " if key is None else f"parts[{j}].branches[{key}] "
                yield Item(part, where, doc.prompt + "\n" + part.prompt)
    else:
        yield Item(doc, "", doc.prompt)


def key_length_rank(doc: QuestionDoc) -> int:
    """1 + the number of choices longer than a single-answer key (1: no choice is longer)."""
    key = _length(next(c.text for c in doc.choices if c.correct))
    return 1 + sum(_length(c.text) > key for c in doc.choices)


def key_is_shortest(doc: QuestionDoc) -> bool:
    key = _length(next(c.text for c in doc.choices if c.correct))
    return all(_length(c.text) >= key for c in doc.choices)


def key_is_strictly_longest(doc: QuestionDoc) -> bool:
    """A single-answer question whose correct choice is longer than every other choice."""
    if doc.effective_format != "single" or len(doc.choices) < 2:
        return False
    right = next(c for c in doc.choices if c.correct)
    return all(_length(right.text) > _length(c.text) for c in doc.choices if not c.correct)


def length_outlier(doc: QuestionDoc) -> str | None:
    """"longer" or "shorter" when a single-answer key stands out by length on its own page."""
    if doc.effective_format != "single" or len(doc.choices) < 2:
        return None
    key = _length(next(c.text for c in doc.choices if c.correct))
    others = [_length(c.text) for c in doc.choices if not c.correct]
    if key > OUTLIER_LONGER * max(others):
        return "longer"
    if key < OUTLIER_SHORTER * min(others):
        return "shorter"
    return None


def correct_all_longer(doc: QuestionDoc) -> bool:
    """A multi-answer question whose every correct choice is longer than every wrong one."""
    if doc.effective_format != "multi":
        return False
    right = [_length(c.text) for c in doc.choices if c.correct]
    wrong = [_length(c.text) for c in doc.choices if not c.correct]
    return bool(right and wrong) and min(right) > max(wrong)


def all_but_one_correct(doc: QuestionDoc) -> bool:
    """A multi-answer question where spotting the one odd choice out answers it."""
    if doc.effective_format != "multi":
        return False
    wrong = sum(not c.correct for c in doc.choices)
    return wrong <= 1


def content_words(text: str) -> set[str]:
    """Words that carry meaning (four letters or more, not the commonest), lower-cased."""
    return {w for w in re.findall(r"[a-z0-9_]+", text.lower()) if len(w) >= 4 and w not in _COMMON}


def key_alone_echoes(doc: QuestionDoc, prompt: str) -> bool:
    """The single-answer key shares more of the prompt's content words than any other choice."""
    words = content_words(prompt)
    shared = {c.key: len(content_words(c.text) & words) for c in doc.choices}
    key = doc.correct_keys[0]
    return all(shared[key] > n for k, n in shared.items() if k != key)


def choices_about_choices(doc: QuestionDoc) -> list[str]:
    """Keys of choices that speak about the other choices ("all of the above")."""
    return [c.key for c in doc.choices if _ABOUT_CHOICES.search(c.text)]


def hedges(text: str) -> list[str]:
    """The hedge words in a text, lower-cased, in order (a word joined by an apostrophe, such
    as can't, is another word)."""
    return [" ".join(m.group(0).lower().split()) for m in _HEDGE.finditer(text)]


def hedged_keys(doc: QuestionDoc) -> list[str]:
    """Where a single-answer key is the only choice that hedges: "choice b ('usually')" for
    the question, "parts[1] choice c (...)" for a case part; every variant is looked at."""
    found: list[str] = []
    for i in range(doc.variant_count):
        for item in items(doc.render(i)):
            q = item.doc
            if q.effective_format != "single":
                continue
            words = {c.key: hedges(c.text) for c in q.choices}
            key = q.correct_keys[0]
            if words[key] and not any(words[k] for k in words if k != key):
                text = item.name(f"choice {key} ({', '.join(map(repr, dict.fromkeys(words[key])))})")
                if text not in found:
                    found.append(text)
    return found


def prompt_pairs(text: str) -> set[tuple[str, str]]:
    """The prompt's adjacent word pairs, lower-cased, so markup and spacing do not hide a copy."""
    words = re.findall(r"[a-z0-9_.]+", text.lower())
    return set(pairwise(words))


def prompt_similarity(a: str, b: str) -> float:
    """Jaccard similarity of two prompts' word pairs (1.0: the same pairs)."""
    pa, pb = prompt_pairs(a), prompt_pairs(b)
    return len(pa & pb) / len(pa | pb) if pa | pb else 1.0


def near_duplicates(docs: list[QuestionDoc]) -> list[tuple[QuestionDoc, QuestionDoc, float]]:
    """Pairs of questions whose prompts share at least NEAR_DUPLICATE_JACCARD of their word pairs."""
    pairs = [(d, prompt_pairs(d.prompt)) for d in docs]
    out = []
    for (a, pa), (b, pb) in combinations(pairs, 2):
        if min(len(pa), len(pb)) < MIN_PROMPT_PAIRS:
            continue
        similarity = len(pa & pb) / len(pa | pb)
        if similarity >= NEAR_DUPLICATE_JACCARD:
            out.append((a, b, similarity))
    return out


@dataclass(frozen=True)
class Computation:
    """One numeric key of one variant: the number, what went in, and the numbers in its text."""

    doc: QuestionDoc
    variant: int
    where: str
    key: float
    inputs: frozenset[float]
    text_numbers: frozenset[float]

    def name(self) -> str:
        part = f", {self.where.strip()}" if self.where else ""
        return f"{question_file(self.doc)} variant {self.variant}{part}"


def numbers_in(text: str) -> set[float]:
    """The numbers written in a text ("1,024" is one number)."""
    return {float(m.replace(",", "")) for m in _NUMBER.findall(text)}


def _numbers(value: Any) -> list[float]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int | float):
        return [float(value)]
    if isinstance(value, list):
        return [x for v in value for x in _numbers(v)]
    return []


def computations(doc: QuestionDoc) -> Iterator[Computation]:
    """Every numeric key of every variant of a question (and of its case parts). Its inputs are
    the variant's variables; a question without variables has only its text's numbers."""
    for i in range(doc.variant_count):
        variant = doc.render(i)
        inputs = {x for v in doc.variant_params(i).values() for x in _numbers(v)}
        for item in items(variant):
            q = item.doc
            if q.effective_format != "numeric" or q.answer is None or q.answer.value is None:
                continue
            text = numbers_in(item.prompt)
            yield Computation(doc, i, item.where, q.answer.value, frozenset(inputs or text),
                              frozenset(text | inputs))


def _rounded(x: float) -> float:
    if x == 0 or not math.isfinite(x):
        return x
    return round(x, KEY_DIGITS - 1 - math.floor(math.log10(abs(x))))


def same_computations(docs: list[QuestionDoc]) -> list[tuple[Computation, Computation]]:
    """Pairs of numeric keys from different questions that are the same computation: equal
    keys, and each one's inputs written in the other (as its variables or in its prompt).
    Word-level duplicates are near_duplicates' business; these read differently and ask
    for the same number from the same numbers."""
    by_key: dict[float, list[Computation]] = defaultdict(list)
    for doc in docs:
        for comp in computations(doc):
            by_key[_rounded(comp.key)].append(comp)
    found = []
    for group in by_key.values():
        for a, b in combinations(group, 2):
            if a.doc.slug == b.doc.slug or len(a.inputs | b.inputs) < MIN_SHARED_INPUTS:
                continue
            if a.inputs <= b.text_numbers and b.inputs <= a.text_numbers:
                found.append((a, b))
    return found


def _share_errors(report: FairnessReport) -> list[Finding]:
    n = report.single_count
    if n < MIN_QUESTIONS_FOR_SHARE_RULES:
        return []
    errors = []
    for rank, count in sorted(report.rank_counts.items()):
        limit = MAX_LONGEST_KEY_SHARE if rank == 1 else MAX_OTHER_RANK_SHARE
        if count / n > limit:
            errors.append(Finding("length-rank", f"the key is the {_rank_name(rank)} choice in {count} of "
                                                 f"{n} single-answer items ({count / n:.1%}); at most "
                                                 f"{limit:.0%} allowed"))
    for what, count in (("longest", report.rank_counts.get(1, 0)), ("shortest", report.shortest_count)):
        if count / n < MIN_EDGE_RANK_SHARE:
            errors.append(Finding("length-rank", f"the key is the {what} choice in only {count} of {n} "
                                                 f"single-answer items ({count / n:.1%}); at least "
                                                 f"{MIN_EDGE_RANK_SHARE:.0%}, or striking it out wins"))
    if report.shortest_count / n > MAX_OTHER_RANK_SHARE:
        errors.append(Finding("length-rank", f"the key is the shortest choice in {report.shortest_count} "
                                             f"of {n} single-answer items ({report.shortest_count / n:.0%}); "
                                             f"at most {MAX_OTHER_RANK_SHARE:.0%} allowed"))
    for key, count in sorted(report.positions.items()):
        if count / n > MAX_POSITION_SHARE:
            errors.append(Finding("key-position", f"choice {key} is the key of {count} of {n} single-answer "
                                                  f"items ({count / n:.1%}); at most "
                                                  f"{MAX_POSITION_SHARE:.0%} allowed"))
    if report.echo_count / n > MAX_ECHO_SHARE:
        errors.append(Finding("prompt-echo", f"the key alone repeats the most of its prompt's words in "
                                             f"{report.echo_count} of {n} single-answer items "
                                             f"({report.echo_count / n:.1%}); at most "
                                             f"{MAX_ECHO_SHARE:.0%} allowed"))
    return errors


def check_fairness(docs: list[QuestionDoc]) -> FairnessReport:
    """Per-question warnings and bank-wide errors about giveaways in choices and prompts."""
    report = FairnessReport()
    for doc in docs:
        for where in hedged_keys(doc):
            report.errors.append(Finding(
                "hedged-key", f"{where}, the key, is the only choice that hedges; state it plainly "
                              "or hedge a distractor as well", question_file(doc)))
    # An exercise has no choices to give away (it is answered by running code) and a
    # talk-through's rubric is ticked after the model answer. A question with variants is
    # counted once, as its first variant reads.
    ranks: Counter[int] = Counter()
    positions: Counter[str] = Counter()
    for doc in docs:
        for item in items(doc.render(0)):
            q, where = item.doc, item.file
            for key in choices_about_choices(q):
                report.errors.append(Finding(
                    "about-choices", item.name(f"choice {key} speaks about the other choices "
                                               "(\"all of the above\"); write it as a claim of its own"),
                    where))
            if q.effective_format == "single":
                report.single_count += 1
                ranks[key_length_rank(q)] += 1
                report.shortest_count += key_is_shortest(q)
                report.echo_count += key_alone_echoes(q, item.prompt)
                positions[q.correct_keys[0]] += 1
                stands_out = length_outlier(q)
                if stands_out:
                    report.warnings.append(Finding(
                        "length-outlier", item.name(f"the key is much {stands_out} than every other "
                                                    "choice"), where))
            elif q.effective_format == "multi":
                right = len(q.correct_keys)
                report.multi_correct_counts[item.name(doc.slug)] = right
                if correct_all_longer(q):
                    report.warnings.append(Finding(
                        "longest-keys", item.name("every correct choice is longer than every wrong one"),
                        where))
                if right > MAX_MULTI_CORRECT:
                    report.warnings.append(Finding(
                        "many-correct", item.name(f"{right} choices are correct; at most "
                                                  f"{MAX_MULTI_CORRECT}"), where))
                if all_but_one_correct(q):
                    report.warnings.append(Finding(
                        "all-but-one", item.name(f"{right} of {len(q.choices)} choices are correct"),
                        where))
    report.rank_counts = dict(sorted(ranks.items()))
    report.positions = dict(positions)
    report.errors += _share_errors(report)
    plain = [d.render(0) for d in docs if not (d.is_exercise or d.is_case or d.is_talk)]
    for a, b, ratio in near_duplicates(plain):
        report.errors.append(Finding(
            "near-duplicate",
            f"prompt shares {ratio:.0%} of its word pairs with {question_file(b)}'s "
            f"(limit {NEAR_DUPLICATE_JACCARD:.0%})", question_file(a)))
    same = same_computations(docs)
    report.same_computations = len(same)
    for x, y in same:
        report.errors.append(Finding(
            "same-computation",
            f"variant {x.variant}{', ' + x.where.strip() if x.where else ''} asks for the same "
            f"number ({x.key:g}) from the same inputs ({', '.join(f'{v:g}' for v in sorted(x.inputs))}) "
            f"as {y.name()}; change one variant's values", question_file(x.doc)))
    return report
