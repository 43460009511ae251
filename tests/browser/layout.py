"""What the layout tests measure in a real page: its size, small tap targets, small text, chart
text, tables that hide columns in a sideways scroll.

Shared by the browser tests and scripts/measure_pages.py, so that the numbers in a report
and the budgets in the tests come from one definition.
"""

from __future__ import annotations

from typing import Any

# A finger needs this much (CSS px) in both directions; Apple asks 44, Material 48.
MIN_TAP_PX = 40
# Chart text is drawn at this size at least, at every width.
MIN_SVG_TEXT_PX = 12
# And so is every other text on a page.
MIN_TEXT_PX = 12

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
    for (const n of a.parentElement.childNodes)
      if (n !== a && (n.nodeType === 3 || /^(CODE|STRONG|EM|B|I|KBD|SPAN|ABBR|TIME)$/.test(n.nodeName)))
        rest += n.textContent || '';
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


# Visible text drawn smaller than the minimum (CSS px), outside pictures and hidden helpers.
SMALL_TEXT = """(min) => {
  const out = [], seen = new Set();
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!el || seen.has(el) || !n.textContent.trim()) continue;
    if (el.closest('svg, .sr, .skip, [hidden], script, style, template, noscript')) continue;
    const range = document.createRange(); range.selectNodeContents(n);
    if (!range.getClientRects().length || getComputedStyle(el).visibility === 'hidden') continue;
    seen.add(el);
    const px = parseFloat(getComputedStyle(el).fontSize);
    if (px < min - 0.01) out.push([n.textContent.trim().slice(0, 40), Math.round(px * 100) / 100]);
  }
  return out;
}"""

# Tables whose columns run past the box that clips them (a sideways scroller, or the page),
# unless that box says so in words (data-scrolls="...").
HIDDEN_COLUMNS = """() => {
  const out = [];
  for (const t of document.querySelectorAll('table')) {
    if (!t.getClientRects().length || t.closest('svg, [hidden]')) continue;
    let box = t.parentElement;
    while (box && box !== document.body) {
      const o = getComputedStyle(box).overflowX;
      if (o === 'auto' || o === 'scroll' || o === 'hidden') break;
      box = box.parentElement;
    }
    const limit = box && box !== document.body ? box.getBoundingClientRect().right
                                                : document.documentElement.clientWidth;
    const right = t.getBoundingClientRect().right;
    if (right > limit + 1 && !(box && box.dataset && box.dataset.scrolls))
      out.push([t.className || '(table)', Math.round(t.getBoundingClientRect().width),
                Math.round(right - limit)]);
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


def small_text(page: Any, minimum: float = MIN_TEXT_PX) -> list[tuple[str, float]]:
    """(text, px) of every visible run of text drawn under `minimum` CSS px."""
    return [(t, float(px)) for t, px in page.evaluate(SMALL_TEXT, minimum)]


def hidden_columns(page: Any) -> list[tuple[str, int, int]]:
    """(class, width, px hidden) of every table that runs past its box without saying so."""
    return [tuple(t) for t in page.evaluate(HIDDEN_COLUMNS)]


def in_viewport(page: Any, selector: str) -> bool:
    """Whether the first visible element matching `selector` lies wholly inside the viewport."""
    return bool(page.evaluate("""(sel) => { const el = Array.from(document.querySelectorAll(sel))
      .find(e => e.getClientRects().length); if (!el) return false;
      const r = el.getBoundingClientRect();
      return r.top >= -1 && r.left >= -1 && r.bottom <= window.innerHeight + 1
        && r.right <= window.innerWidth + 1;
    }""", selector))


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


def assert_text_size(page: Any) -> None:
    small = small_text(page)
    assert not small, f"text under {MIN_TEXT_PX} px: {small[:8]}"


def assert_columns_shown(page: Any) -> None:
    hidden = hidden_columns(page)
    assert not hidden, f"tables hiding columns unannounced (class, width, px hidden): {hidden[:6]}"


def assert_svg_text(page: Any, minimum: float = MIN_SVG_TEXT_PX) -> None:
    small = [(t, round(px, 1)) for t, px in svg_text_sizes(page) if px < minimum - 0.01]
    assert not small, f"SVG text under {minimum} px: {small[:6]}"
