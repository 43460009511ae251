"""What the layout tests measure in a real page: its size, small tap targets, chart text.

Shared by the browser tests and scripts/measure_pages.py, so that the numbers in a report
and the budgets in the tests come from one definition.
"""

from __future__ import annotations

from typing import Any

# A finger needs this much (CSS px) in both directions; Apple asks 44, Material 48.
MIN_TAP_PX = 40
# Chart text is drawn at this size at least, at every width.
MIN_SVG_TEXT_PX = 12

# The document's height and width against the viewport's.
PAGE_SIZE = """() => ({height: document.documentElement.scrollHeight,
  width: document.documentElement.scrollWidth, vw: window.innerWidth, vh: window.innerHeight})"""

# Every visible <text> in an SVG, as the CSS px it is drawn at.
SVG_TEXT_PX = """() => Array.from(document.querySelectorAll('svg text'))
  .filter(t => t.getClientRects().length > 0 && t.getScreenCTM() !== null && t.textContent.trim())
  .map(t => { const m = t.getScreenCTM();
              return [t.textContent, parseFloat(getComputedStyle(t).fontSize) * Math.hypot(m.a, m.b)]; })"""

# Controls smaller than the minimum in either direction. A checkbox or radio is measured by
# the label around it (the label is what a finger hits); a link inside a sentence is left
# out (WCAG 2.5.8's inline exception), as are controls nobody can see.
SMALL_TARGETS = """(min) => {
  const seen = new Set(), out = [];
  const visible = el => { const r = el.getBoundingClientRect(), s = getComputedStyle(el);
    return r.width > 0 && r.height > 0 && s.visibility !== 'hidden' && !el.closest('[hidden]'); };
  const inSentence = a => { let rest = '';
    for (const n of a.parentElement.childNodes) if (n !== a) rest += n.textContent || '';
    return /[A-Za-z]{3,}/.test(rest) && !a.closest('nav, .row, .actions, td, th, li.link-row'); };
  for (let el of document.querySelectorAll(
      'a[href], button, summary, select, textarea, input:not([type=hidden])')) {
    if (el.closest('svg, .skip, .CodeMirror') || !visible(el)) continue;
    if (el.matches('input[type=checkbox], input[type=radio]')) el = el.closest('label') || el;
    if (el.matches('a') && inSentence(el)) continue;
    if (seen.has(el)) continue;
    seen.add(el);
    const r = el.getBoundingClientRect();
    if (r.width < min - 0.5 || r.height < min - 0.5)
      out.push([(el.innerText || el.value || el.name || el.tagName).trim().slice(0, 40),
                Math.round(r.width), Math.round(r.height)]);
  }
  return out;
}"""


def page_size(page: Any) -> dict[str, int]:
    """The page's scroll height and width, and the viewport's."""
    return dict(page.evaluate(PAGE_SIZE))


def small_targets(page: Any, minimum: int = MIN_TAP_PX) -> list[tuple[str, int, int]]:
    """(text, width, height) of every control smaller than `minimum` CSS px."""
    return [tuple(t) for t in page.evaluate(SMALL_TARGETS, minimum)]


def svg_text_sizes(page: Any) -> list[tuple[str, float]]:
    """(text, px) of every visible SVG text, at the size it is drawn on screen."""
    return [(t, float(px)) for t, px in page.evaluate(SVG_TEXT_PX)]


def top_of(page: Any, selector: str) -> float | None:
    """Where the first element matching `selector` starts, in document px (None if absent)."""
    box = page.evaluate("""(sel) => { const el = document.querySelector(sel);
      return el ? el.getBoundingClientRect().top + window.scrollY : null; }""", selector)
    return None if box is None else float(box)


def assert_no_overflow(page: Any) -> None:
    """The page is never wider than its viewport."""
    size = page_size(page)
    assert size["width"] <= size["vw"], f"the page is {size['width']} px wide in {size['vw']} px"


def assert_tap_targets(page: Any) -> None:
    small = small_targets(page)
    assert not small, f"tap targets under {MIN_TAP_PX} px: {small[:8]}"


def assert_svg_text(page: Any, minimum: float = MIN_SVG_TEXT_PX) -> None:
    small = [(t, round(px, 1)) for t, px in svg_text_sizes(page) if px < minimum - 0.01]
    assert not small, f"SVG text under {minimum} px: {small[:6]}"
