"""Questions from crawled pages: by site layout (pipelines/ingest/site_layouts/*.yaml, or the
user's own file) or, with no layout, from schema.org ``Quiz``/``Question`` markup.

``parse_page(url, html, layouts=None)`` returns the questions on a page (an empty list for pages
that are not question pages, such as listings or indexes) or raises ``PageParseError`` (a
``ValueError`` with a one-line reason) for a page that looks like a question page but is
malformed, and for any HTML document cut before ``</html>`` (a truncated listing would
otherwise lose its links silently). It never raises anything else, whatever the bytes.
``layouts`` defaults to the demo site's three shipped layouts, tried in order; the first whose
``match`` selector finds an element reads the page. A page no layout matches is read for
schema.org markup (``pipelines.ingest.schema_org``). Parsing relies on markup (classes, data
attributes, JSON-LD, microdata), never on URL shapes unless a layout says so.

HTML is parsed by lexbor (``selectolax``) as browsers parse it (``pipelines.ingest.html_dom``).
"""

from __future__ import annotations

from typing import Sequence

from selectolax.lexbor import LexborHTMLParser

from pipelines.ingest.html_dom import MAX_DEPTH, PageParseError, ParsedQuestion, decode_page, build_dom
from pipelines.ingest.schema_org import schema_org_questions
from pipelines.ingest.site_layout import SiteLayout, default_layouts

__all__ = ["MAX_DEPTH", "PageParseError", "ParsedQuestion", "build_dom", "detect_layout", "parse_page"]


def detect_layout(dom: LexborHTMLParser, layouts: Sequence[SiteLayout] | None = None) -> str | None:
    layout = _matching_layout(dom, layouts)
    return layout.name if layout is not None else None


def _matching_layout(dom: LexborHTMLParser, layouts: Sequence[SiteLayout] | None) -> SiteLayout | None:
    if layouts is None:
        layouts = default_layouts()
    return next((layout for layout in layouts if layout.matches(dom)), None)


def parse_page(url: str, html: str | bytes, layouts: Sequence[SiteLayout] | None = None) -> list[ParsedQuestion]:
    """The questions on one page; [] for other pages; PageParseError for broken question pages."""
    try:
        text = decode_page(html)
        dom, closed = build_dom(text)
        layout = _matching_layout(dom, layouts)
        if layout is None:
            questions = schema_org_questions(url, text)
            name = "schema.org"
        else:
            questions = layout.parse(url, dom)
            name = layout.name
        if not closed and (questions or layout is not None or _looks_like_html(text)):
            # a cut listing would silently lose its links: report it like a cut question page
            raise PageParseError(f"{name + ' page' if questions or layout else 'HTML page'} is truncated: "
                                 "the document ends before </html>")
        for q in questions:
            _check(q)
        return questions
    except PageParseError:
        raise
    except Exception as exc:  # anything unexpected in untrusted markup becomes a parse error
        raise PageParseError(f"unparseable page: {type(exc).__name__}: {exc}".splitlines()[0][:300]) from None


def _looks_like_html(text: str) -> bool:
    head = text[:512].lstrip().lower()
    return head.startswith(("<!doctype html", "<html"))


def _check(q: ParsedQuestion) -> None:
    n = q.num_choices
    if n < 2:
        raise PageParseError(f"{q.layout} page has {n} option(s)")
    if not 0 <= q.answer_idx < n:
        raise PageParseError(f"{q.layout} page has an answer index out of range: {q.answer_idx} for {n} options")
    if not q.subject:
        raise PageParseError(f"{q.layout} page names no subject")
    if not q.skill:
        raise PageParseError(f"{q.layout} page names no skill")
    if not q.problem and q.problem_image_url is None:
        raise PageParseError(f"{q.layout} page has neither question text nor image")
