"""Can an answer be picked without knowing it? Rules over the bank's choices and prompts.

Pure functions over loaded questions; `ddpdrill bank check` prints their findings
(docs/question-format.md, "Fairness"). A warning names one question a reviewer
should look at; an error is a bank-wide pattern that fails the check.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from itertools import combinations, pairwise

from app.questions.schema import QuestionDoc

# A test-taker who always picks the longest choice should win at most about a third of
# the time: with four choices chance is 25%, and some keys are longest by nature.
MAX_LONGEST_KEY_SHARE = 0.35
# With four choices a position is right 25% of the time by chance; above 40% a learner
# gains by guessing that letter.
MAX_POSITION_SHARE = 0.40
# A multi-answer question with more right choices than this rewards ticking everything
# (scoring is right picks minus wrong picks).
MAX_MULTI_CORRECT = 3
# Below this many single-answer questions, shares (longest key, key position) are noise,
# not habit: two questions of which one has a long key are not a pattern.
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


@dataclass(frozen=True)
class Finding:
    rule: str
    message: str
    file: str = ""

    def __str__(self) -> str:
        where = f"{self.file}: " if self.file else ""
        return f"{where}{self.message} [{self.rule}]"


@dataclass
class FairnessReport:
    warnings: list[Finding] = field(default_factory=list)
    errors: list[Finding] = field(default_factory=list)
    # Numbers behind the bank-wide rules, for printing.
    single_count: int = 0
    longest_key_count: int = 0
    positions: dict[str, int] = field(default_factory=dict)
    multi_correct_counts: dict[str, int] = field(default_factory=dict)

    @property
    def longest_key_share(self) -> float:
        return self.longest_key_count / self.single_count if self.single_count else 0.0

    def summary(self) -> str:
        pos = ", ".join(f"{k}: {n}" for k, n in sorted(self.positions.items()))
        spread = Counter(self.multi_correct_counts.values())
        multi = ", ".join(f"{n} right: {q}" for n, q in sorted(spread.items()))
        return (
            f"single-answer keys strictly longest: {self.longest_key_count}/{self.single_count} "
            f"({self.longest_key_share:.0%}, limit {MAX_LONGEST_KEY_SHARE:.0%}); "
            f"key positions: {pos or 'none'}; multi-answer questions with "
            f"{multi or 'none'}"
        )


def question_file(doc: QuestionDoc) -> str:
    return f"{doc.topic}/{doc.slug}.yaml"


def key_is_strictly_longest(doc: QuestionDoc) -> bool:
    """A single-answer question whose correct choice is longer than every other choice."""
    if doc.effective_format != "single" or len(doc.choices) < 2:
        return False
    right = next(c for c in doc.choices if c.correct)
    return all(len(right.text) > len(c.text) for c in doc.choices if not c.correct)


def correct_all_longer(doc: QuestionDoc) -> bool:
    """A multi-answer question whose every correct choice is longer than every wrong one."""
    if doc.effective_format != "multi":
        return False
    right = [len(c.text) for c in doc.choices if c.correct]
    wrong = [len(c.text) for c in doc.choices if not c.correct]
    return bool(right and wrong) and min(right) > max(wrong)


def all_but_one_correct(doc: QuestionDoc) -> bool:
    """A multi-answer question where spotting the one odd choice out answers it."""
    if doc.effective_format != "multi":
        return False
    wrong = sum(not c.correct for c in doc.choices)
    return wrong <= 1


def hedges(text: str) -> list[str]:
    """The hedge words in a text, lower-cased, in order (a word joined by an apostrophe, such
    as can't, is another word)."""
    return [" ".join(m.group(0).lower().split()) for m in _HEDGE.finditer(text)]


def hedged_keys(doc: QuestionDoc) -> list[str]:
    """Where a single-answer key is the only choice that hedges: "choice b ('usually')" for
    the question, "parts[1] choice c (...)" for a case part; every variant is looked at."""
    found: list[str] = []
    for i in range(doc.variant_count):
        variant = doc.render(i)
        groups: list[tuple[str, QuestionDoc]] = []
        if variant.is_case:
            groups = [(f"parts[{j}] ", variant.part(j)) for j in range(len(variant.parts))]
        elif not (variant.is_exercise or variant.is_talk):
            groups = [("", variant)]
        for where, q in groups:
            if q.effective_format != "single":
                continue
            words = {c.key: hedges(c.text) for c in q.choices}
            key = q.correct_keys[0]
            if words[key] and not any(words[k] for k in words if k != key):
                text = f"{where}choice {key} ({', '.join(map(repr, dict.fromkeys(words[key])))})"
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


def check_fairness(docs: list[QuestionDoc]) -> FairnessReport:
    """Per-question warnings and bank-wide errors about giveaways in choices and prompts."""
    report = FairnessReport()
    for doc in docs:
        for where in hedged_keys(doc):
            report.errors.append(Finding(
                "hedged-key", f"{where}, the key, is the only choice that hedges; state it plainly "
                              "or hedge a distractor as well", question_file(doc)))
    # An exercise has no choices to give away: it is answered by running code; a case's
    # parts and a talk-through's rubric are not counted in the bank-wide shares. A question
    # with variants is counted once, as its first variant reads.
    docs = [d.render(0) for d in docs if not (d.is_exercise or d.is_case or d.is_talk)]
    singles = [d for d in docs if d.effective_format == "single"]
    report.single_count = len(singles)
    positions: Counter[str] = Counter()
    for doc in docs:
        where = question_file(doc)
        if key_is_strictly_longest(doc):
            report.longest_key_count += 1
            report.warnings.append(Finding(
                "longest-key", "the correct choice is strictly the longest", where))
        if correct_all_longer(doc):
            report.warnings.append(Finding(
                "longest-keys", "every correct choice is longer than every wrong one", where))
        if doc.effective_format == "multi":
            right = len(doc.correct_keys)
            report.multi_correct_counts[doc.slug] = right
            if right > MAX_MULTI_CORRECT:
                report.warnings.append(Finding(
                    "many-correct", f"{right} choices are correct; at most {MAX_MULTI_CORRECT}", where))
            if all_but_one_correct(doc):
                report.warnings.append(Finding(
                    "all-but-one", f"{right} of {len(doc.choices)} choices are correct", where))
        if doc.effective_format == "single":
            positions[doc.correct_keys[0]] += 1
    report.positions = dict(positions)
    if len(singles) >= MIN_QUESTIONS_FOR_SHARE_RULES and report.longest_key_share > MAX_LONGEST_KEY_SHARE:
        report.errors.append(Finding(
            "longest-key-share",
            f"the correct choice is strictly the longest in {report.longest_key_count} of "
            f"{len(singles)} single-answer questions ({report.longest_key_share:.0%}); "
            f"at most {MAX_LONGEST_KEY_SHARE:.0%} allowed"))
    if len(singles) >= MIN_QUESTIONS_FOR_SHARE_RULES:
        for key, n in sorted(positions.items()):
            if n / len(singles) > MAX_POSITION_SHARE:
                report.errors.append(Finding(
                    "key-position",
                    f"choice {key} is the key of {n} of {len(singles)} single-answer questions "
                    f"({n / len(singles):.0%}); at most {MAX_POSITION_SHARE:.0%} allowed"))
    for a, b, ratio in near_duplicates(docs):
        report.errors.append(Finding(
            "near-duplicate",
            f"prompt shares {ratio:.0%} of its word pairs with {question_file(b)}'s "
            f"(limit {NEAR_DUPLICATE_JACCARD:.0%})", question_file(a)))
    return report
