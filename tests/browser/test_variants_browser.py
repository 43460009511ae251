"""Variants, cases and talk-throughs in real Chromium: two learners get different numbers and are
each graded right; a case is answered part by part and a talk-through scored with its rubric, by
keyboard and by tapping, at desktop and phone width, without sideways scrolling."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from app.questions.bank import load_bank
from app.quizzes.grading import correct_answer
from tests.factories import VARIANT_BANK
from tests.servers import PAGE_TIMEOUT_MS, serve, settings_for

pytestmark = pytest.mark.browser

DOCS = {q.slug: q for q in load_bank(VARIANT_BANK).questions}
# The smallest tap target the answer area may offer (a finger is about 9 mm).
MIN_TAP_PX = 40


@pytest.fixture(scope="module")
def variant_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The app with the variant bank (variables, a case, a talk-through), no workers."""
    with serve(settings_for(tmp_path_factory.mktemp("live-variants"), VARIANT_BANK, workers=0)) as url:
        yield url


def _context(browser: Any, url: str, width: int = 1280) -> Any:
    context = browser.new_context(base_url=url, viewport={"width": width, "height": 900})
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    return context


def _variant(page: Any) -> int:
    return int(page.locator("#answer-form input[name=variant]").get_attribute("value"))


def _focused(page: Any, element_id: str) -> None:
    """Wait until the element has the focus (htmx moves it to `autofocus` as the swap settles)."""
    # A function, not an expression: Playwright would eval() an expression, which the CSP refuses.
    page.wait_for_function("(id) => document.activeElement && document.activeElement.id === id",
                           arg=element_id)


def _no_sideways_scroll(page: Any) -> None:
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")


def _tap_targets_are_big_enough(page: Any) -> None:
    """Every button and answer label in the answer area is at least MIN_TAP_PX high."""
    sizes = page.evaluate("""() => [...document.querySelectorAll(
        '#answer-area button, #answer-area label.choice, #answer-area a.button')]
        .filter(e => e.offsetParent !== null)
        .map(e => [e.textContent.trim().slice(0, 40), e.getBoundingClientRect().height])""")
    assert sizes, "nothing to tap"
    small = [(label, h) for label, h in sizes if h < MIN_TAP_PX]
    assert small == [], small


def test_two_learners_see_different_numbers_and_each_is_graded_right(
    browser: Any, variant_server: str,
) -> None:
    slug = "ring-send-volume"
    seen: dict[int, str] = {}
    contexts = []
    try:
        for _ in range(12):  # eight variants: a few learners are enough to meet two
            context = _context(browser, variant_server)
            contexts.append(context)
            page = context.new_page()
            page.goto(f"/questions/{slug}")
            variant = _variant(page)
            if variant in seen:
                continue
            prompt = page.locator(".prompt").inner_text()
            assert "{{" not in prompt
            seen[variant] = prompt
            key = DOCS[slug].render(variant).answer
            assert key is not None and key.value is not None
            page.locator("#answer-input").fill(f"{key.value:g}")
            page.get_by_role("button", name="Submit answer").click()
            verdict = page.locator("#answer-area #verdict")
            verdict.wait_for()
            assert verdict.inner_text() == "Right"
            assert f"{key.value:g}" in page.locator("#answer-area section.graded").inner_text()
            if len(seen) == 2:
                break
    finally:
        for context in contexts:
            context.close()
    assert len(seen) == 2
    first, second = seen.values()
    assert first != second


@pytest.mark.parametrize("width", [1280, 390])
def test_a_case_is_answered_part_by_part_by_keyboard_and_by_tapping(
    browser: Any, variant_server: str, width: int,
) -> None:
    context = _context(browser, variant_server, width)
    page = context.new_page()
    page.goto("/questions/zero3-memory-case")
    doc = DOCS["zero3-memory-case"].render(_variant(page))
    scenario = page.locator(".prompt.scenario")
    assert scenario.is_visible()
    assert page.locator(".case-part.current .part-heading").inner_text() == "Part 1 of 3"
    assert "The job moves to" not in page.content()
    _no_sideways_scroll(page)
    _tap_targets_are_big_enough(page)

    # Part 1 by keyboard alone: into the radio group, arrow to the key, Enter submits.
    page.evaluate("window.__sameDocument = true")
    key0 = correct_answer(doc.part(0))
    page.locator("#answer-form input[name=answer]").first.focus()
    for _ in range("abcd".index(key0)):
        page.keyboard.press("ArrowDown")
    assert page.locator(f"#answer-form input[value={key0}]").is_checked()
    page.keyboard.press("Enter")
    heading = page.locator("#case-part-h-1")
    heading.wait_for()
    # The graded part stays, the next one appears with the focus, in the same document.
    _focused(page, "case-part-h-1")
    assert page.evaluate("window.__sameDocument") is True
    assert "right" in page.locator("#case-part-0 .part-heading").inner_text()
    assert scenario.is_visible()

    # Part 2 typed, part 3 tapped.
    page.locator("#answer-input").fill(f"{correct_answer(doc.part(1)):g}")
    page.get_by_role("button", name="Submit part 2").click()
    page.locator("#case-part-h-2").wait_for()
    assert page.locator(".case-parts > li").count() == 2
    _no_sideways_scroll(page)
    _tap_targets_are_big_enough(page)
    key2 = correct_answer(doc.part(2))
    wrong = next(c for c in doc.part(2).choices if c.key != key2)
    page.locator("#answer-form label.choice", has_text=wrong.text[:20]).click()
    page.get_by_role("button", name="Submit the last part").click()
    verdict = page.locator("#answer-area #verdict")
    verdict.wait_for()
    assert verdict.inner_text() == "2 of 3 parts right · 67%"
    _focused(page, "verdict")
    assert page.locator(".case-parts > li").count() == 3
    assert page.locator(".case-part.answered.wrong").count() == 1
    _no_sideways_scroll(page)
    context.close()


@pytest.mark.parametrize("width", [1280, 390])
def test_a_talk_through_is_written_then_scored_by_ticking_the_rubric(
    browser: Any, variant_server: str, width: int,
) -> None:
    context = _context(browser, variant_server, width)
    page = context.new_page()
    page.goto("/questions/step-time-doubled-talk")
    assert page.locator(".model-answer").count() == 0
    _no_sideways_scroll(page)
    _tap_targets_are_big_enough(page)
    written = ("Pin the last good image first.\nThen compare per-rank step times across the "
               "nodes and diff the two runs.")
    page.locator("#talk-text").fill(written)
    page.get_by_role("button", name="Show the model answer").click()
    page.locator(".model-answer").wait_for()
    _focused(page, "talk-yours-h")
    assert page.locator(".talk-text").inner_text() == written
    # What you wrote sits beside the rubric you tick against it (right above it on a phone),
    # the model answer after both.
    yours = page.locator(".talk-written").bounding_box()
    rubric = page.locator("fieldset.rubric").bounding_box()
    model = page.locator(".model-answer").bounding_box()
    if width > 800:
        assert abs(yours["y"] - rubric["y"]) < 80 and yours["x"] < rubric["x"]
    else:
        assert 0 <= rubric["y"] - (yours["y"] + yours["height"]) < 120
    assert model["y"] > rubric["y"] + rubric["height"] - 1
    moves = page.locator("input[name=ticked]")
    assert moves.count() == 6
    _no_sideways_scroll(page)
    _tap_targets_are_big_enough(page)
    # The first move by keyboard (Space ticks a focused checkbox), the fourth by tapping its label.
    moves.nth(0).focus()
    page.keyboard.press("Space")
    page.locator("label.rubric-move").nth(3).click()
    assert [moves.nth(i).is_checked() for i in range(6)] == [True, False, False, True, False, False]
    page.get_by_role("button", name="Score my answer").click()
    verdict = page.locator("#answer-area #verdict")
    verdict.wait_for()
    assert verdict.inner_text() == "2 of 6 moves · 33%"
    assert page.locator(".rubric-graded li.correct").count() == 2
    _no_sideways_scroll(page)
    context.close()
