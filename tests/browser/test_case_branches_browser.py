"""A case whose second part follows the first part's choice, in real Chromium at desktop and
phone width: each pick leads to its own version of part 2, said so on the page, and the
finished case keeps the version that was answered."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from app.questions.bank import load_bank
from tests.factories import TESTS
from tests.servers import PAGE_TIMEOUT_MS, serve, settings_for

pytestmark = pytest.mark.browser

BRANCHING_BANK = TESTS / "fixtures" / "branching_bank"
SLUG = "tp-placement-branch-case"
(CASE,) = load_bank(BRANCHING_BANK).questions


@pytest.fixture(scope="module")
def branching_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serve(settings_for(tmp_path_factory.mktemp("live-branches"), BRANCHING_BANK, workers=0)) as url:
        yield url


def _no_sideways_scroll(page: Any) -> None:
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")


@pytest.mark.parametrize(("width", "pick"), [(1280, "a"), (390, "b")])
def test_the_second_part_is_the_version_the_first_pick_led_to(
    browser: Any, branching_server: str, width: int, pick: str,
) -> None:
    context = browser.new_context(base_url=branching_server, viewport={"width": width, "height": 900})
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    page = context.new_page()
    page.goto(f"/questions/{SLUG}")
    variant = int(page.locator("#answer-form input[name=variant]").get_attribute("value"))
    doc = CASE.render(variant)
    chosen, other = doc.part(1, [pick]), doc.part(1, ["b" if pick == "a" else "a"])
    assert page.locator(".part-follows").count() == 0
    _no_sideways_scroll(page)

    label = next(c.text for c in doc.part(0).choices if c.key == pick)
    page.locator("#answer-form label.choice", has_text=label[:20]).click()
    page.get_by_role("button", name="Submit part 1").click()
    page.locator("#case-part-h-1").wait_for()
    current = page.locator(".case-part.current")
    assert current.locator(".part-follows").inner_text() == "This part follows your answer to part 1."
    assert current.locator(".part-prompt").inner_text().strip() == chosen.prompt
    assert other.prompt not in page.content()
    _no_sideways_scroll(page)

    assert chosen.answer is not None and chosen.answer.value is not None
    page.locator("#answer-input").fill(f"{chosen.answer.value:g}")
    page.get_by_role("button", name="Submit part 2").click()
    page.locator("#case-part-h-2").wait_for()
    assert "right" in page.locator("#case-part-1 .part-heading").inner_text()
    page.locator("#answer-form label.choice").first.click()
    page.get_by_role("button", name="Submit the last part").click()
    verdict = page.locator("#answer-area #verdict")
    verdict.wait_for()
    expected = "Right: every part · 100%" if pick == "a" else "2 of 3 parts right · 67%"
    assert verdict.inner_text() == expected
    assert page.locator("#case-part-1 .part-follows").inner_text() == (
        "This part followed your answer to part 1.")
    assert page.locator("#case-part-1 .part-prompt").inner_text().strip() == chosen.prompt
    _no_sideways_scroll(page)
    context.close()

