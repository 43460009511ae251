"""Markdown to safe HTML: raw HTML in the source is escaped, links are checked, code highlighted."""

from __future__ import annotations

import re
from functools import lru_cache
from html import escape

import bleach
from markdown_it import MarkdownIt
from markupsafe import Markup
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer, TextLexer, get_lexer_by_name
from pygments.util import ClassNotFound

ALLOWED_TAGS = {
    "p", "br", "hr", "em", "strong", "code", "pre", "span", "div", "blockquote",
    "ul", "ol", "li", "a", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td",
    "sub", "sup", "del",
}
ALLOWED_ATTRS = {"a": ["href", "title"], "span": ["class"], "div": ["class"], "code": ["class"],
                 "pre": ["class"]}
ALLOWED_PROTOCOLS = {"http", "https", "mailto"}


def highlight_code(code: str, lang: str = "python", hl_lines: list[int] | None = None) -> Markup:
    """Pygments HTML for code (CSS classes from static/pygments.css)."""
    try:
        lexer = get_lexer_by_name(lang) if lang else TextLexer()
    except ClassNotFound:
        lexer = TextLexer()
    formatter = HtmlFormatter(cssclass="highlight", hl_lines=hl_lines or [], linenos=False)
    return Markup(highlight(code, lexer, formatter))


def _fence(md: MarkdownIt) -> None:
    def render(self, tokens, idx, options, env):
        token = tokens[idx]
        lang = (token.info or "").strip().split()[0] if token.info else ""
        return str(highlight_code(token.content, lang or "text"))

    md.add_render_rule("fence", render)


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")
    md.enable("strikethrough")
    _fence(md)
    return md


# Rendered texts kept: the bank's prompts, explanations and choices are few and are
# rendered on every page view; sanitizing them again each time was most of a page's CPU.
RENDER_CACHE_SIZE = 4096


@lru_cache(maxsize=RENDER_CACHE_SIZE)
def render_markdown(text: str) -> Markup:
    """Sanitized HTML for author-written markdown."""
    html = _parser().render(text or "")
    clean = bleach.clean(html, tags=ALLOWED_TAGS, attributes=ALLOWED_ATTRS,
                         protocols=ALLOWED_PROTOCOLS, strip=True)
    return Markup(clean)


@lru_cache(maxsize=RENDER_CACHE_SIZE)
def render_inline(text: str) -> Markup:
    """Sanitized inline markdown (choice texts): no paragraphs around it."""
    html = _parser().renderInline(text or "")
    return Markup(bleach.clean(html, tags={"em", "strong", "code", "del", "sub", "sup"},
                               attributes={}, strip=True))


def pygments_css() -> str:
    return HtmlFormatter(style="friendly").get_style_defs(".highlight")


__all__ = ["PythonLexer", "highlight_code", "pygments_css", "render_inline", "render_markdown"]


# Where a long measured value (JSON, a tensor, a path) may break onto the next line: after
# these, so `{"join":false}` never splits inside a word.
_BREAK_AFTER = re.compile(r"([,:;/=\]\)}])")


def breakable(text: object) -> Markup:
    """The text, escaped, with line-break opportunities after separators only."""
    return Markup("<wbr>".join(escape(part) for part in _BREAK_AFTER.sub("\\1\0", str(text))
                               .split("\0")))
