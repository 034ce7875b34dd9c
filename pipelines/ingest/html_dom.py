"""The HTML a crawled page is read with: lexbor's DOM (``selectolax``), as browsers parse it, and
the helpers the page readers share (``site_layout`` for layout files, ``schema_org`` for markup):
decoding, text of a node as shown, image URLs, the parsed question and its error.

Texts are returned as shown: entities decoded, Unicode kept as is, inner white space kept (a
layout may ask to collapse it), only ASCII white space around the element's text removed;
``<br>`` is a line break, ``<sup>``/``<sub>`` are raised and lowered (``x²``, ``H₂O``). ``markup_text``
reads a file source's text written in HTML the same way. NUL characters, which HTML parsers drop, are kept so that ingest
quarantines them.

A page nesting elements deeper than ``MAX_DEPTH`` is refused before it is parsed (real quiz pages
nest a few dozen; lexbor's tree building slows down with the square of the depth): a linear scan
of the tags keeps the stack of open elements, closing those HTML closes implicitly (``li``,
``p``, table parts, ``option``, ``dt``/``dd``) as browsers do.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from urllib.parse import urljoin

from selectolax.lexbor import LexborHTMLParser, LexborNode

ASCII_WS = " \t\r\n\f"
MAX_DEPTH = 256
# NUL and C1 controls as written: the parser would drop or remap them; stand-ins from a private use
# plane go through it and are turned back in every text read
_TO_STANDIN = {c: 0x10FF00 + c for c in [0, *range(0x80, 0xA0)]}
_FROM_STANDIN = {v: k for k, v in _TO_STANDIN.items()}
SUBJECT_NAMES = {"science": "science", "technology": "technology", "engineering": "engineering",
                 "math": "math", "mathematics": "math"}
_HTML_END = re.compile(r"</html\s*>", re.I)
_TAGS = re.compile(r"<!--.*?(?:-->|\Z)|<(script|style|textarea|title)\b.*?(?:</\1\s*>|\Z)|<(/?)([A-Za-z][A-Za-z0-9-]*)",
                   re.S | re.I)
VOID = frozenset("area base br col embed hr img input link meta param source track wbr".split())
_TABLE_SECTIONS = frozenset({"thead", "tbody", "tfoot"})
# start tag -> (open elements it closes, elements that stop the search): HTML's implied end tags
IMPLIED_END = {
    "li": (frozenset({"li"}), frozenset({"ul", "ol", "menu", "table"})),
    "dt": (frozenset({"dt", "dd"}), frozenset({"dl", "table"})),
    "dd": (frozenset({"dt", "dd"}), frozenset({"dl", "table"})),
    "tr": (frozenset({"tr"}), frozenset({"table"}) | _TABLE_SECTIONS),
    "td": (frozenset({"td", "th"}), frozenset({"tr", "table"})),
    "th": (frozenset({"td", "th"}), frozenset({"tr", "table"})),
    "thead": (_TABLE_SECTIONS | {"tr"}, frozenset({"table"})),
    "tbody": (_TABLE_SECTIONS | {"tr"}, frozenset({"table"})),
    "tfoot": (_TABLE_SECTIONS | {"tr"}, frozenset({"table"})),
    "option": (frozenset({"option"}), frozenset({"select", "datalist", "optgroup"})),
}
_CLOSES_P = frozenset(
    "address article aside blockquote details dialog div dl fieldset figcaption figure footer form h1 h2 h3 h4 h5 "
    "h6 header hgroup hr main menu nav ol p pre section table ul".split()
)
_P_SCOPE = frozenset("applet button caption html table td th marquee object template".split())


class PageParseError(ValueError):
    """A question page that cannot be parsed; the message is one line."""


@dataclass(frozen=True)
class ParsedQuestion:
    url: str
    layout: str
    subject: str
    grade: str | None
    skill: str
    problem: str
    problem_image_url: str | None = None
    problem_image_alt: str | None = None
    choices: tuple[str, ...] | None = None
    choice_image_urls: tuple[str, ...] | None = None
    choice_image_alts: tuple[str, ...] | None = None
    answer_idx: int = -1
    extra: dict = field(default_factory=dict)

    @property
    def image_alts(self) -> tuple[str, ...]:
        """Alt texts of every image on the question (problem first), for captions."""
        out = (self.problem_image_alt,) if self.problem_image_alt is not None else ()
        return out + (self.choice_image_alts or ())

    @property
    def num_choices(self) -> int:
        return len(self.choices if self.choices is not None else self.choice_image_urls or ())


# ---- the DOM ------------------------------------------------------------------------------


def _close_open(stack: list[str], closes, stops) -> None:
    """Close the outermost open element in ``closes`` above the nearest one in ``stops``."""
    target = None
    for depth in range(len(stack) - 1, -1, -1):
        if stack[depth] in stops:
            break
        if stack[depth] in closes:
            target = depth
    if target is not None:
        del stack[target:]


def refuse_deep_nesting(text: str) -> None:
    stack: list[str] = []
    for match in _TAGS.finditer(text):
        name = match.group(3)
        if name is None:
            continue
        tag = name.lower()
        if match.group(2):
            for depth in range(len(stack) - 1, -1, -1):
                if stack[depth] == tag:
                    del stack[depth:]
                    break
            continue
        rule = IMPLIED_END.get(tag)
        if rule is not None:
            _close_open(stack, *rule)
        if tag in _CLOSES_P:
            _close_open(stack, ("p",), _P_SCOPE)
        if tag not in VOID:
            if len(stack) >= MAX_DEPTH:
                raise PageParseError(f"page nests elements more than {MAX_DEPTH} deep")
            stack.append(tag)


def build_dom(html: str | bytes) -> tuple[LexborHTMLParser, bool]:
    """(parsed document, whether the document reached </html>)."""
    text = decode_page(html)
    refuse_deep_nesting(text)
    return LexborHTMLParser(to_standins(text)), _HTML_END.search(text) is not None


def to_standins(text: str) -> str:
    return text.translate(_TO_STANDIN)


def from_standins(text: str) -> str:
    return text.translate(_FROM_STANDIN)


# what a reader sees of ``<sup>``/``<sub>``: Unicode's raised and lowered characters where every
# character has one (``x<sup>2</sup>`` is x², ``H<sub>2</sub>O`` is H₂O, as the LaTeX stage reads
# them), else the text after ``^`` or ``_``, in brackets when longer than one character
_SCRIPTS = {
    "sup": (str.maketrans("0123456789+-−=()ni", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁻⁼⁽⁾ⁿⁱ"), "^"),
    "sub": (str.maketrans("0123456789+-−=()aehklmnopstx", "₀₁₂₃₄₅₆₇₈₉₊₋₋₌₍₎ₐₑₕₖₗₘₙₒₚₛₜₓ"), "_"),
}
# elements a browser shows on lines of their own (for texts written in HTML, ``markup_text``)
_BLOCKS = frozenset("address blockquote caption center dd div dl dt figcaption figure h1 h2 h3 h4 h5 h6 hr li ol p "
                    "pre table tbody tfoot thead tr ul".split())


def scripted(text: str, tag: str) -> str:
    """The text of a ``<sup>`` or ``<sub>`` element as a reader sees it raised or lowered."""
    table, mark = _SCRIPTS[tag]
    inner = text.strip(ASCII_WS)
    if not inner:
        return text
    if all(ord(ch) in table for ch in inner):
        return inner.translate(table)
    return f"{mark}{inner}" if len(inner) == 1 else f"{mark}({inner})"


_MATH_ELEMENTS = frozenset({"script", "span", "math"})  # what may hold a typeset formula (``math_source``)


def math_source(node: LexborNode) -> str | None:
    """The TeX a page's typeset formula was written in, delimited as TeX math (``\\( … \\)``,
    ``\\[ … \\]`` for display), or None when ``node`` is no typeset formula or keeps no TeX:
    MathJax 2's ``<script type="math/tex">``, KaTeX's ``<span class="katex">`` and MathML's
    ``<math>`` (MathJax 3's assistive MathML too) through their ``application/x-tex``
    annotation; a ``<math>`` without one by its presentation elements (``mathml.mathml_tex``).
    Their other text is the formula drawn again (KaTeX's ``katex-html``: ``x2``)."""
    tag = node.tag
    display = False
    if tag == "script":
        kind = (attr(node, "type") or "").replace(" ", "").lower()
        if not kind.startswith("math/tex"):
            return None
        tex, display = node.text(deep=True) or "", "mode=display" in kind
    elif tag == "math" or (tag == "span" and "katex" in (attr(node, "class") or "").split()):
        annotation = node.css_first('annotation[encoding="application/x-tex"]')
        if annotation is not None:
            tex = annotation.text(deep=True) or ""
        elif tag == "math":
            from pipelines.ingest.mathml import mathml_tex

            tex = mathml_tex(node) or ""  # its presentation elements read as TeX
            if not tex:
                return None
        else:
            return None
        display = attr(node, "display") == "block" or (
            node.parent is not None and "katex-display" in (attr(node.parent, "class") or "").split())
    else:
        return None
    tex = from_standins(tex).strip(ASCII_WS)  # attr() turns stand-ins back itself; text() does not
    if not tex:
        return None
    return f"\\[ {tex} \\]" if display else f"\\( {tex} \\)"


def node_text(node: LexborNode, exclude: frozenset[int] = frozenset(), blocks: bool = False) -> str:
    """The text of ``node`` as shown: scripts, styles, comments and ``exclude`` (node ids) left out,
    ``<sup>`` and ``<sub>`` raised and lowered (``scripted``), typeset formulas as the TeX they
    were written in (``math_source``); with ``blocks``, block elements (paragraphs, list items,
    table rows) on lines of their own."""
    parts: list[str] = []
    stack: list = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, str):  # a block's closing line break
            if parts and not parts[-1].endswith("\n"):
                parts.append(current)
            continue
        if current.is_text_node:
            parts.append(current.text_content or "")
            continue
        tag = current.tag
        if tag == "br":
            parts.append("\n")
            continue
        if tag in _MATH_ELEMENTS and current.mem_id not in exclude:
            tex = math_source(current)
            if tex is not None:
                parts.append(tex)
                continue
        if current is not node and (tag in ("script", "style", "template") or tag.startswith("-") or tag.startswith("_")
                                    or current.mem_id in exclude):
            continue
        if current is not node and tag in _SCRIPTS:
            parts.append(scripted(node_text(current, exclude, blocks), tag))
            continue
        if blocks and current is not node and tag in _BLOCKS:
            if parts and not parts[-1].endswith("\n"):
                parts.append("\n")
            stack.append("\n")
        stack.extend(reversed(list(current.iter(include_text=True))))
    return from_standins("".join(parts))


# proof that a text is written in HTML: an end tag of an element that formats text, or a line
# break (``x<sup>2</sup>``, ``<p>…</p>``, ``a<br>b``); a lone ``<b>`` may be maths (``a<b>c``), and
# placeholders (``<image 1>``, ``<img1>``) and chemists' ``<smiles>`` are not HTML
_MARKUP = re.compile(
    r"</(?:a|b|big|blockquote|center|code|del|div|em|font|h[1-6]|i|ins|li|mark|ol|p|pre|s|small|span|strike|strong|"
    r"sub|sup|table|tbody|td|tfoot|th|thead|tr|u|ul)\s*>|<(?:br|hr)\s*/?>",
    re.I,
)
_PICTURE_TAG = re.compile(r"<img\s[^<>]*>", re.I)
_PLACEHOLDER_START = re.compile(r"<(?=(?:image|img|图片)[ _]?\d*>)", re.I)
# a character reference (``&gt;``, ``&#39;``, ``&#x3c0;``), always closed by ``;`` in what is read
_REFERENCE = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")


class PictureInMarkup(ValueError):
    """A text written in HTML holds a picture (``<img src=…>``) that its text alone would lose."""


def markup_text(text: str) -> str:
    """A text from a file source as a reader sees it when it is written in HTML (quiz sites'
    JSON exports, scraped corpora): its tags read as a browser shows them (``node_text`` with
    blocks on lines of their own) and its character references decoded (``&quot;Gold&quot;``);
    any other text is returned as it is. Raises ``PictureInMarkup`` for a text in HTML that
    holds a picture."""
    if _MARKUP.search(text):
        picture = _PICTURE_TAG.search(text)
        if picture:
            raise PictureInMarkup(picture.group())
        # placeholders (<image 1>, <img1>, LLaVA's <image>) stay text: HTML reads <image> as a picture
        kept = _PLACEHOLDER_START.sub("&lt;", text)
        body = LexborHTMLParser(f"<body>{to_standins(kept)}</body>").body
        return clean(node_text(body, blocks=True)) if body is not None else text
    if "&" in text:
        return _REFERENCE.sub(lambda m: html.unescape(m.group()), text)
    return text


def attr(node: LexborNode, name: str) -> str | None:
    value = node.attributes.get(name, "")
    return from_standins(value if value is not None else "") if name in node.attributes else None


def encloses(outer: LexborNode, inner: LexborNode) -> bool:
    target = outer.mem_id
    node = inner.parent
    while node is not None:
        if node.mem_id == target:
            return True
        node = node.parent
    return False


_BOMS = ((b"\xef\xbb\xbf", "utf-8"), (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"))


def header_charset(content_type: str | None) -> str | None:
    """The ``charset`` parameter of a Content-Type header value, or None."""
    m = re.search(r"charset\s*=\s*[\"']?([A-Za-z0-9_.:-]+)", content_type or "")
    return m.group(1).lower() if m else None


def decode_page(html: str | bytes, charset: str | None = None) -> str:
    """A page's text: a byte order mark wins, then ``charset`` (the HTTP header's), then the
    page's own ``<meta charset>``, else UTF-8, as browsers decide."""
    if isinstance(html, str):
        return html
    for bom, encoding in _BOMS:  # a byte order mark overrides any declared charset, as in browsers
        if html.startswith(bom):
            return html[len(bom):].decode(encoding, "replace")
    if charset:
        try:
            return html.decode(charset, "replace")
        except LookupError:
            pass  # an unknown header charset: the page's own declaration decides
    head = html[:2048].decode("ascii", "replace").lower()
    m = re.search(r"charset=[\"']?([a-z0-9_-]+)", head)
    enc = m.group(1) if m else "utf-8"
    try:
        return html.decode(enc, "replace")
    except LookupError:
        return html.decode("utf-8", "replace")


def clean(text: str) -> str:
    return text.strip(ASCII_WS)


def subject_name(text: str) -> str:
    lowered = (text or "").lower()
    return SUBJECT_NAMES.get(lowered, lowered)


# where lazy-loading pages keep a picture's address until a script of theirs moves it to src
LAZY_SOURCES = ("data-src", "data-original", "data-lazy-src")


def picture_source(attributes) -> str | None:
    """The address a reader's browser shows an ``<img>`` from (``attributes``: its attributes by
    name): ``src``, unless a lazy-loading page keeps the picture's in ``data-src`` (``src`` then
    missing or a ``data:`` placeholder); else the first of ``srcset``; None for none."""
    def value(name: str) -> str:
        found = attributes.get(name)
        return found.strip(ASCII_WS) if isinstance(found, str) else ""

    src = value("src")
    lazy = next((v for v in map(value, LAZY_SOURCES) if v), "")
    if lazy and (not src or (src.startswith("data:") and not lazy.startswith("data:"))):
        return lazy
    if src:
        return src
    first = (value("srcset") or value("data-srcset")).split(",")[0].split()
    return first[0] if first else None


def image_of(url: str, node: LexborNode | None) -> tuple[str | None, str | None]:
    """(absolute address, alt) of an ``<img>`` (``picture_source``; a ``data:`` URI stays as it
    is); PageParseError for one without any."""
    if node is None:
        return None, None
    src = picture_source({name: attr(node, name) for name in node.attributes})
    if not src:
        raise PageParseError("an image has no src")
    return (src if src.startswith("data:") else urljoin(url, src)), attr(node, "alt") or ""


# ---- pages ---------------------------------------------------------------------------------
