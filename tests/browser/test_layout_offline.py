"""Readable on every screen and working offline, measured in real Chromium.

- The verify, compare (a knob re-run above the folded first run) and hang pages are never wider than the
  viewport at 1280 px and 390 px (document.documentElement.scrollWidth).
- Every rendered SVG text is at least 12 CSS px at both widths (font size times the
  picture's scale on screen), and at 390 px every control is at least 40 px.
- With every request outside 127.0.0.1 aborted, no page breaks and none asks for another
  origin; /docs (Swagger UI, vendored) still renders the API.
- A disabled button looks disabled.

Set DDPDRILL_SCREENSHOTS=<folder> to save the pictures (docs/screenshots/ holds the README's).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

import pytest

from tests.browser.layout import MIN_SVG_TEXT_PX, assert_svg_text, assert_tap_targets, svg_text_sizes
from tests.browser.test_verify_browser import RUN_TIMEOUT_MS, shot

pytestmark = pytest.mark.browser

WIDTHS = {"desktop": 1280, "phone": 390}


@pytest.fixture(params=list(WIDTHS), ids=list(WIDTHS))
def sized_page(request: pytest.FixtureRequest, browser: Any, verify_server: str) -> Iterator[Any]:
    context = browser.new_context(base_url=verify_server,
                                  viewport={"width": WIDTHS[request.param], "height": 900})
    context.set_default_timeout(RUN_TIMEOUT_MS)
    page = context.new_page()
    page.width_name = request.param
    yield page
    context.close()


def assert_fits(page: Any) -> None:
    """No horizontal page scroll, every SVG text readable, and (on a phone) every control
    big enough for a finger."""
    width = page.evaluate("document.documentElement.clientWidth")
    scroll = page.evaluate("document.documentElement.scrollWidth")
    assert scroll <= width, f"the page is {scroll} px wide in a {width} px viewport"
    assert svg_text_sizes(page), "no picture was drawn"
    assert_svg_text(page, MIN_SVG_TEXT_PX)
    if width <= 390:
        assert_tap_targets(page)


def predict_and_run(page: Any, slug: str, *, choice: str | None = None,
                    number: str | None = None) -> Any:
    page.goto(f"/questions/{slug}")
    if choice is not None:
        page.get_by_label(choice, exact=False).check()
    else:
        page.locator("#answer-input").fill(number or "")
    page.get_by_role("button", name="Run it").click()
    run = page.locator("#verify-result .run.done")
    run.wait_for()
    return run


def test_verify_page_fits_and_its_pictures_are_readable(sized_page: Any) -> None:
    predict_and_run(sized_page, "averaged-gradient-two-ranks",
                    choice="model.weight.grad after backward()")
    # Open every folded picture (timeline, buckets), so its text is measured too.
    sized_page.evaluate("document.querySelectorAll('details.fold, details.bucket-iteration')"
                        ".forEach(d => d.open = true)")
    assert_fits(sized_page)
    shot(sized_page, f"verify-{sized_page.width_name}")


def test_compare_page_fits_with_two_runs_side_by_side(sized_page: Any) -> None:
    predict_and_run(sized_page, "ring-attention-kv-sends", number="2.5")
    sized_page.locator("select[name='knob.world_size']").select_option("2")
    sized_page.locator(".verify-button").click()
    sized_page.locator(".run-compare .run-now .run.done").wait_for()
    # The new run leads, full width: what changed, then its pictures (folded) under it.
    assert sized_page.locator(".run-now .compare tbody tr").count() > 0
    assert sized_page.locator(".run-now .knob-hint").count() == 0
    sized_page.evaluate("document.querySelectorAll('details.fold').forEach(d => d.open = true)")
    now_w = sized_page.locator(".run-now").bounding_box()["width"]
    assert sized_page.locator(".run-before").bounding_box()["width"] == now_w
    assert_fits(sized_page)
    shot(sized_page, f"compare-{sized_page.width_name}")


def test_hang_page_fits_with_the_whole_error_visible(sized_page: Any) -> None:
    run = predict_and_run(sized_page, "uneven-trace-without-join",
                          choice="Rank 0 waits in the all-reduce")
    assert run.get_attribute("data-outcome") == "timeout"
    sized_page.evaluate("document.querySelectorAll('details.fold').forEach(d => d.open = true)")
    assert_fits(sized_page)
    # Each lane has one end marker at most, and only the kinds the legend explains.
    for lane in run.locator("svg.timeline g.lane").all():
        marks = lane.locator("g.mark").all()
        assert len(marks) <= 1
        assert all(m.get_attribute("class") in ("mark exit", "mark error") for m in marks)
    shot(sized_page, f"hang-{sized_page.width_name}")


def test_no_page_needs_another_origin(browser: Any, live_server: str) -> None:
    context = browser.new_context(base_url=live_server)
    outside: list[str] = []
    errors: list[str] = []

    def route(r: Any) -> None:
        if urlparse(r.request.url).hostname == "127.0.0.1":
            r.continue_()
        else:
            outside.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    try:
        for path in ("/", "/topics", "/topics/basics", "/questions/fixture-single",
                     "/questions/fixture-trace-buckets", "/login", "/author"):
            response = page.goto(path)
            assert response is not None and response.ok, path
            assert page.locator("main").count() == 1, path
        # The quiz form and a quiz page.
        page.goto("/topics")
        page.locator("form.quiz-form button[type=submit]").click()
        page.locator("article.question").wait_for()
        # The API docs render from vendored files: the title and the operations appear.
        page.goto("/docs")
        page.locator(".swagger-ui .info .title", has_text="DDP Drill").wait_for()
        assert page.locator(".swagger-ui .opblock").count() > 3
        # The footer's API link leads there.
        page.goto("/")
        page.locator("footer.site a", has_text="API").click()
        page.locator(".swagger-ui .opblock").first.wait_for()
    finally:
        context.close()
    assert outside == [], f"pages asked for other origins: {outside}"
    assert errors == [], errors


def test_a_disabled_button_looks_disabled(browser: Any, live_server: str) -> None:
    context = browser.new_context(base_url=live_server)
    page = context.new_page()
    try:
        page.goto("/")
        page.evaluate("""() => document.querySelector('main').insertAdjacentHTML('beforeend',
            '<button class="primary" id="on">On</button>' +
            '<button class="primary" id="off" disabled>Off</button>' +
            '<button id="plain-off" disabled>Off</button>')""")
        style = """id => { const s = getComputedStyle(document.getElementById(id));
                          return [s.cursor, s.backgroundColor, s.color]; }"""
        on, off, plain_off = (page.evaluate(style, i) for i in ("on", "off", "plain-off"))
        assert off[0] == "not-allowed" and plain_off[0] == "not-allowed"
        assert on[0] == "pointer"
        assert off[1] != on[1]  # not the active accent colour
    finally:
        context.close()
