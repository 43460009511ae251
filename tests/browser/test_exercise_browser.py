"""Exercises in real Chromium against real gloo runs: run the starter and see it fail with a
diagnosis, write the fix, run it and see every visible check pass and the hidden count;
keyboard only; at phone width; and without JavaScript (a plain textarea)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.test_verify_browser import RUN_TIMEOUT_MS, shot

pytestmark = pytest.mark.browser

URL = "/exercises/reduce-vs-all-reduce"
FIX = ("import torch\nimport torch.distributed as dist\n\n"
       "local_tokens = torch.randint(100, 1000, ())\n"
       "dist.all_reduce(local_tokens)\n"
       "total_tokens = int(local_tokens.item())\n"
       "scale = 1.0 / total_tokens\n")


def _page(browser: Any, base: str, **options: Any) -> Any:
    context = browser.new_context(base_url=base, **options)
    context.set_default_timeout(RUN_TIMEOUT_MS)
    return context.new_page()


def _run_with_keyboard(page: Any) -> Any:
    """Press Run from the keyboard and wait for the finished result."""
    page.locator(".run-button").focus()
    page.keyboard.press("Enter")
    done = page.locator("#submission[data-status=done]")
    done.wait_for()
    return done


def _replace_code_with_keyboard(page: Any, code: str) -> None:
    page.locator(".CodeMirror textarea").focus()
    page.keyboard.press("Control+A")
    page.keyboard.press("Delete")
    # Typed text would be re-indented by the editor; insert_text is a paste.
    page.keyboard.insert_text(code)
    page.keyboard.press("Escape")  # the editor hands focus to Run


@pytest.fixture
def page(browser: Any, verify_server: str) -> Any:
    page = _page(browser, verify_server, viewport={"width": 1100, "height": 900})
    yield page
    page.context.close()


def test_run_the_starter_see_it_fail_then_fix_it_and_every_visible_check_passes(page: Any) -> None:
    page.goto(URL)
    editor = page.locator(".CodeMirror")
    assert editor.is_visible() and not page.locator("textarea#code").is_visible()
    assert page.locator(".CodeMirror-linenumber").first.is_visible()  # line numbers
    assert page.locator(".CodeMirror span.cm-keyword").count() > 0  # syntax highlighting
    result = _run_with_keyboard(page)
    assert result.get_attribute("data-passed") == "false"
    assert "Diagnosis" in page.locator(".diagnosis").inner_text()
    assert page.locator("tr[data-check=visible][data-passed=false]").count() >= 1
    assert page.locator(".hidden-count").inner_text() == "0 of 1 hidden checks pass."
    # One headline, in words that add up: the visible and hidden checks that fail.
    head = page.locator("#submission .result-headline")
    failing = page.locator("tr[data-check=visible][data-passed=false]").count()
    assert head.inner_text() == (f"✗ {failing + 1} checks fail: {failing} you can see below "
                                 "and 1 hidden.")
    # The result is where the keyboard and the screen are: focused and scrolled to.
    assert page.evaluate("document.activeElement.classList.contains('result-headline')")
    shot(page, "exercise-starter-fails")

    _replace_code_with_keyboard(page, FIX)
    assert page.evaluate("document.activeElement.classList.contains('run-button')")
    page.keyboard.press("Enter")
    passed = page.locator("#submission[data-passed=true]")
    passed.wait_for()
    rows = page.locator("tr[data-check=visible]")
    assert rows.count() == 2
    assert all(r.get_attribute("data-passed") == "true" for r in rows.all())
    assert page.locator(".hidden-count").inner_text() == "1 of 1 hidden checks pass."
    assert page.locator("#submission .result-headline").inner_text() == (
        "✓ Passed: every check passes, hidden ones too.")
    # Passing is not a dead end: why it works, and the next exercise.
    assert page.locator("#submission .solved-next .explanation").inner_text().strip()
    assert page.locator("#submission .next-exercise a[href^='/exercises/']").count() == 1
    shot(page, "exercise-fixed-passes")
    # After a reload the exercise is marked solved and opens on the passing code.
    page.reload()
    assert "solved" in page.locator(".solved-mark").inner_text()
    assert page.evaluate("document.querySelector('.CodeMirror').CodeMirror.getValue()") == FIX


def test_reset_to_starter_and_hints_work_from_the_keyboard(page: Any) -> None:
    page.goto(URL)
    starter = page.evaluate("document.querySelector('.CodeMirror').CodeMirror.getValue()")
    _replace_code_with_keyboard(page, "print('scratch')\n")
    page.keyboard.press("Tab")  # Run -> Reset to starter
    assert page.evaluate("document.activeElement.classList.contains('reset-starter')")
    page.keyboard.press("Enter")
    assert page.evaluate("document.querySelector('.CodeMirror').CodeMirror.getValue()") == starter
    summary = page.locator(".hints summary").first
    summary.focus()
    page.keyboard.press("Enter")
    assert page.locator(".hints details").first.get_attribute("open") is not None
    assert "dist.reduce" in page.locator(".hints details").first.inner_text()


def test_at_phone_width_nothing_overflows_and_the_result_fits(browser: Any, verify_server: str) -> None:
    page = _page(browser, verify_server, viewport={"width": 390, "height": 844}, is_mobile=True,
                 has_touch=True)
    try:
        page.goto(URL)
        _run_with_keyboard(page)
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, width
        box = page.locator(".CodeMirror").bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390
        shot(page, "exercise-phone")
    finally:
        page.context.close()


def test_without_javascript_the_textarea_submits_and_the_result_page_shows_the_checks(
    browser: Any, verify_server: str
) -> None:
    page = _page(browser, verify_server, java_script_enabled=False,
                 viewport={"width": 1100, "height": 900})
    try:
        page.goto(URL)
        area = page.locator("textarea#code")
        assert area.is_visible()
        area.fill(FIX)
        page.locator(".run-button").click()
        page.wait_for_url("**/submissions/**")
        # The page refreshes itself (a meta refresh) until the run is done.
        page.locator("#submission[data-status=done]").wait_for()
        assert page.locator("#submission").get_attribute("data-passed") == "true"
        assert page.locator("textarea#code").input_value() == FIX
    finally:
        page.context.close()


def test_the_solution_opens_only_after_three_failed_runs(page: Any) -> None:
    """Each failed Run says how many are left; the solution page is refused until the third;
    then the result links to it and it shows the diff from the learner's code."""
    page.goto(URL)
    starter = page.locator("template#starter-code").evaluate("t => t.innerHTML")
    def run_again(code: str) -> None:
        old = page.locator("#submission").element_handle() if page.locator("#submission").count() else None
        _replace_code_with_keyboard(page, code)
        page.keyboard.press("Enter")
        if old is not None:  # the previous result goes first, then the new one finishes
            page.wait_for_function("el => !el.isConnected", arg=old)
        page.locator("#submission[data-status=done]").wait_for()

    for tried, left in ((1, 2), (2, 1)):
        # Each Run a different code (the same code twice is one cached run, one try).
        run_again(f"{starter}\n# try {tried}\n")
        assert page.locator(".runs-to-solution").get_attribute("data-runs") == str(left)
        assert page.locator(".see-solution").count() == 0
        assert page.request.get("/exercises/reduce-vs-all-reduce/solution").status == 403
    run_again(f"{starter}\n# try 3\n")
    link = page.locator(".see-solution")
    link.wait_for()
    link.click()
    page.wait_for_url("**/solution")
    assert page.locator("pre.diff .add").count() > 0
    assert "dist.all_reduce" in page.locator("pre.diff").inner_text()
    assert "# try 3" in page.locator("pre.diff .del").all_inner_texts()[-1]
    shot(page, "exercise-solution")
