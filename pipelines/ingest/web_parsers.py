"""Parsers for quiz pages in the three layouts the crawler knows (IXL-like, ProProfs-like,
Triviaplaza-like), with layout detection.

``parse_page(url, html)`` returns the questions on a page (an empty list for pages that
are not question pages, such as listings or indexes) or raises ``PageParseError`` (a
``ValueError`` with a one-line reason) for a page that looks like a question page of a
known layout but is malformed, and for any HTML document cut before ``</html>``
(a truncated listing would otherwise lose its links silently). It never raises anything else, whatever the
bytes. Parsing uses only the standard library (``html.parser``) and relies on the
layouts' markup (class names, data attributes, JSON-LD), never on URL shapes or on how a
particular site generates its content.

Texts are returned as shown: HTML entities decoded, Unicode kept as is, inner white space
kept, only ASCII white space around the element's text removed.

Hostile markup stays linear-time: the tree builder closes the elements HTML closes
implicitly (``li``, ``p``, ``tr``, ``td``/``th``, ``option``, ``dt``/``dd``), as browsers do, and a
page nesting elements deeper than ``MAX_DEPTH`` is refused with a PageParseError (searches
run per option cell over its subtree, so unbounded nesting would make them quadratic).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

VOID = frozenset("area base br col embed hr img input link meta param source track wbr".split())
ASCII_WS = " \t\r\n\f"
MAX_DEPTH = 256  # real quiz pages nest a few dozen elements
# start tag -> (open elements it closes, elements that stop the search): HTML's implied end tags
_TABLE_SECTIONS = frozenset({"thead", "tbody", "tfoot"})
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
# block elements that close an open <p> (HTML's "close a p element in button scope")
_CLOSES_P = frozenset(
    "address article aside blockquote details dialog div dl fieldset figcaption figure footer form h1 h2 h3 h4 h5 "
    "h6 header hgroup hr main menu nav ol p pre section table ul".split()
)
_CLOSES_P_TARGET = frozenset({"p"})
_P_SCOPE = frozenset("applet button caption html table td th marquee object template".split())
SUBJECT_NAMES = {"science": "science", "technology": "technology", "engineering": "engineering",
                 "math": "math", "mathematics": "math"}


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


# ---- a small, forgiving DOM ----------------------------------------------------------------


class Node:
    __slots__ = ("tag", "attrs", "children", "kids", "parent")

    def __init__(self, tag: str, attrs: dict, parent: "Node | None"):
        self.tag = tag
        self.attrs = attrs
        self.children: list = []  # text and element children in document order
        self.kids: list = []  # element children only
        self.parent = parent

    @property
    def classes(self) -> set[str]:
        return set((self.attrs.get("class") or "").split())

    def iter(self):
        """This node and its descendants, in document order."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            if node.kids:
                stack.extend(node.kids[::-1])

    def _matches(self, tag, cls, attrs) -> bool:
        if tag is not None and self.tag != tag:
            return False
        if cls is not None and cls not in (self.attrs.get("class") or "").split():
            return False
        return not any(self.attrs.get(k.replace("_", "-")) != v for k, v in attrs.items())

    def find_all(self, tag: str | None = None, cls: str | None = None, **attrs) -> list["Node"]:
        return [n for n in self.iter() if n is not self and n._matches(tag, cls, attrs)]

    def find(self, tag: str | None = None, cls: str | None = None, **attrs) -> "Node | None":
        for n in self.iter():
            if n is not self and n._matches(tag, cls, attrs):
                return n
        return None

    def text(self) -> str:
        parts: list[str] = []

        def walk(n):
            for c in n.children:
                if isinstance(c, str):
                    parts.append(c)
                elif c.tag not in ("script", "style"):
                    walk(c)

        walk(self)
        return "".join(parts)


class _TreeBuilder(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {}, None)
        self.stack = [self.root]
        self.closed_html = False

    def handle_starttag(self, tag, attrs):
        self._close_implied(tag)
        parent = self.stack[-1]
        node = Node(tag, {k: (v if v is not None else "") for k, v in attrs}, parent)
        parent.children.append(node)
        parent.kids.append(node)
        if tag not in VOID:
            if len(self.stack) > MAX_DEPTH:
                raise PageParseError(f"page nests elements more than {MAX_DEPTH} deep")
            self.stack.append(node)

    def _close_implied(self, tag):
        rule = IMPLIED_END.get(tag)
        if rule is not None:
            closes, stops = rule
            self._close_open(closes, stops)
        if tag in _CLOSES_P:
            self._close_open(_CLOSES_P_TARGET, _P_SCOPE)

    def _close_open(self, closes, stops):
        """Close the outermost open element in ``closes`` above the nearest one in ``stops``."""
        target = None
        for depth in range(len(self.stack) - 1, 0, -1):
            open_tag = self.stack[depth].tag
            if open_tag in stops:
                break
            if open_tag in closes:
                target = depth
        if target is not None:
            del self.stack[target:]

    def handle_startendtag(self, tag, attrs):
        parent = self.stack[-1]
        node = Node(tag, {k: (v if v is not None else "") for k, v in attrs}, parent)
        parent.children.append(node)
        parent.kids.append(node)

    def handle_endtag(self, tag):
        if tag == "html":
            self.closed_html = True
        for depth in range(len(self.stack) - 1, 0, -1):
            if self.stack[depth].tag == tag:
                del self.stack[depth:]
                return

    def handle_data(self, data):
        self.stack[-1].children.append(data)


def build_dom(html: str) -> tuple[Node, bool]:
    """(document node, whether the document reached </html>)."""
    b = _TreeBuilder()
    b.feed(html)
    b.close()
    return b.root, b.closed_html


_BOMS = ((b"\xef\xbb\xbf", "utf-8"), (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"))


def _decode(html: str | bytes) -> str:
    if isinstance(html, str):
        return html
    for bom, encoding in _BOMS:  # a byte order mark overrides any declared charset, as in browsers
        if html.startswith(bom):
            return html[len(bom):].decode(encoding, "replace")
    head = html[:2048].decode("ascii", "replace").lower()
    m = re.search(r"charset=[\"']?([a-z0-9_-]+)", head)
    enc = m.group(1) if m else "utf-8"
    try:
        return html.decode(enc, "replace")
    except LookupError:
        return html.decode("utf-8", "replace")


def _clean(text: str) -> str:
    return text.strip(ASCII_WS)


def _last_segment(href: str) -> str:
    parts = [p for p in urlsplit(href).path.split("/") if p]
    return parts[-1] if parts else ""


# ---- layout detection ------------------------------------------------------------------


def detect_layout(dom: Node) -> str | None:
    for n in dom.iter():
        if n.tag == "div" and "question-area" in n.classes:
            return "ixl"
        if n.tag == "main" and n.attrs.get("id") == "practice":
            return "ixl"
        if n.tag == "table" and "question_table" in n.classes:
            return "proprofs"
        if n.tag == "div" and n.attrs.get("id") == "quiz_container":
            return "proprofs"
        if n.tag == "article" and "trivia-question" in n.classes:
            return "triviaplaza"
    return None


def parse_page(url: str, html: str | bytes) -> list[ParsedQuestion]:
    """The questions on one page; [] for other pages; PageParseError for broken question pages."""
    try:
        text = _decode(html)
        dom, closed = build_dom(text)
        layout = detect_layout(dom)
        if layout is None:
            if not closed and _looks_like_html(text):
                # a cut listing would silently lose its links: report it like a cut question page
                raise PageParseError("HTML page is truncated: the document ends before </html>")
            return []
        parser = {"ixl": _parse_ixl, "proprofs": _parse_proprofs, "triviaplaza": _parse_trivia}[layout]
        questions = parser(url, dom)
        if not closed:
            raise PageParseError(f"{layout} page is truncated: the document ends before </html>")
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


def _img(url: str, node: Node | None) -> tuple[str | None, str | None]:
    if node is None:
        return None, None
    src = node.attrs.get("src")
    if not src:
        raise PageParseError("an image has no src")
    return urljoin(url, src.strip(ASCII_WS)), node.attrs.get("alt", "")


def _refuse_unclosed_crumbs(crumbs: Node | None, question: Node | None, layout: str) -> None:
    """Breadcrumbs holding the question (left open) would take the skill from a later link."""
    node = question
    while crumbs is not None and node is not None:
        if node is crumbs:
            raise PageParseError(f"{layout} page has breadcrumbs that are not closed before the question")
        node = node.parent


def _refuse_nested(cells: list[Node], layout: str) -> None:
    """Options inside options (unclosed tags) would give each option the text of the rest."""
    ids = {id(c) for c in cells}
    for cell in cells:
        node = cell.parent
        while node is not None:
            if id(node) in ids:
                raise PageParseError(f"{layout} page has options nested inside each other (unclosed tags)")
            node = node.parent


def _options(url: str, cells: list[Node], layout: str):
    """(texts or None, image urls or None, image alts or None) of option cells."""
    _refuse_nested(cells, layout)
    imgs = [c.find("img") for c in cells]
    if all(i is not None for i in imgs):
        pairs = [_img(url, i) for i in imgs]
        return None, tuple(p[0] for p in pairs), tuple(p[1] or "" for p in pairs)
    if any(i is not None for i in imgs):
        raise PageParseError(f"{layout} page mixes text and image options")
    return tuple(_clean(c.text()) for c in cells), None, None


def _parse_ixl(url: str, dom: Node) -> list[ParsedQuestion]:
    main = dom.find("main", id="practice")
    area = dom.find("div", "question-area")
    if area is None:
        raise PageParseError("ixl page without a question area")
    subject = grade = skill = None
    if main is not None:
        subject, grade, skill = main.attrs.get("data-subject"), main.attrs.get("data-grade"), main.attrs.get("data-skill")
    if not (subject and skill):
        crumbs = dom.find("nav", "breadcrumbs")
        _refuse_unclosed_crumbs(crumbs, area, "ixl")
        links = [a.attrs.get("href", "") for a in crumbs.find_all("a")] if crumbs else []
        if len(links) >= 3:
            subject, grade, skill = _last_segment(links[0]), _last_segment(links[1]), _last_segment(links[-1])
    text_node = area.find("div", "question-text")
    if text_node is None:
        raise PageParseError("ixl page without question text")
    p = text_node.find("p") or text_node
    problem = _clean(p.text())
    img_url, img_alt = _img(url, (area.find("div", "question-image") or Node("x", {}, None)).find("img"))
    box = area.find("div", "answer-choices")
    if box is None:
        raise PageParseError("ixl page without answer choices")
    tiles = box.find_all("div", "choice-tile")
    tiles.sort(key=lambda t: int(t.attrs.get("data-index", "0")) if t.attrs.get("data-index", "").isdigit() else 0)
    choices, curls, calts = _options(url, tiles, "ixl")
    sol = dom.find(None, "correct-answer")
    if sol is None or not sol.attrs.get("data-answer-index", "").strip().lstrip("-").isdigit():
        raise PageParseError("ixl page without a correct-answer index")
    return [ParsedQuestion(url, "ixl", SUBJECT_NAMES.get((subject or "").lower(), (subject or "").lower()),
                           grade or None, skill or "", problem, img_url, img_alt, choices, curls, calts,
                           int(sol.attrs["data-answer-index"].strip()))]


def _parse_proprofs(url: str, dom: Node) -> list[ParsedQuestion]:
    crumbs = dom.find("div", "bread_crumb")
    _refuse_unclosed_crumbs(crumbs, dom.find("table", "question_table"), "proprofs")
    links = crumbs.find_all("a") if crumbs else []
    if len(links) < 3:
        raise PageParseError("proprofs page without topic and quiz breadcrumbs")
    subject = _clean(links[1].text()).lower()
    skill = _last_segment(links[-1].attrs.get("href", ""))
    table = dom.find("table", "question_table")
    if table is None:
        raise PageParseError("proprofs page without a question table")
    qtext = table.find("td", "question_text")
    if qtext is None:
        raise PageParseError("proprofs page without question text")
    problem = _clean(qtext.text())
    pic = table.find("td", "question_pic")
    img_url, img_alt = _img(url, pic.find("img") if pic else None)
    opts = dom.find("table", "options_table")
    if opts is None:
        raise PageParseError("proprofs page without an options table")
    rows = [r for r in opts.find_all("tr") if "option_row" in r.classes]
    cells = []
    letters = []
    for r in rows:
        cell = r.find("td", "opt_text") or r.find("td", "opt_pic")
        if cell is None:
            raise PageParseError("proprofs option row without an option cell")
        cells.append(cell)
        lt = r.find("td", "opt_letter")
        letters.append(_clean(lt.text()).rstrip(".").strip(ASCII_WS) if lt else "")
    choices, curls, calts = _options(url, cells, "proprofs")
    box = dom.find("div", "answer_box")
    opt = box.find("span", "correct_opt") if box else None
    if opt is None:
        raise PageParseError("proprofs page without a correct answer")
    letter = _clean(opt.text()).rstrip(".").strip(ASCII_WS)
    if letter not in letters:
        raise PageParseError(f"proprofs correct answer {letter!r} is not one of the options")
    return [ParsedQuestion(url, "proprofs", SUBJECT_NAMES.get(subject, subject), None, skill, problem,
                           img_url, img_alt, choices, curls, calts, letters.index(letter))]


def _parse_trivia(url: str, dom: Node) -> list[ParsedQuestion]:
    crumbs = dom.find("ul", "crumbs")
    _refuse_unclosed_crumbs(crumbs, dom.find("article", "trivia-question"), "triviaplaza")
    links = crumbs.find_all("a") if crumbs else []
    if len(links) < 3:
        raise PageParseError("triviaplaza page without category and quiz breadcrumbs")
    subject = _last_segment(links[1].attrs.get("href", "")).lower()
    skill = _last_segment(links[-1].attrs.get("href", ""))
    art = dom.find("article", "trivia-question")
    ptext = art.find("p", "trivia-question__text")
    if ptext is None:
        raise PageParseError("triviaplaza page without question text")
    problem = _clean(ptext.text())
    fig = art.find("figure", "trivia-question__media")
    img_url, img_alt = _img(url, fig.find("img") if fig else None)
    ol = art.find("ol", "trivia-answers")
    if ol is None:
        raise PageParseError("triviaplaza page without answers")
    items = [li for li in ol.find_all("li") if "trivia-answer" in li.classes]
    cells = [li.find("button") or li for li in items]
    choices, curls, calts = _options(url, cells, "triviaplaza")
    position = None
    for script in dom.find_all("script", type="application/ld+json"):
        try:
            data = json.loads(script.text())
        except (ValueError, RecursionError):
            raise PageParseError("triviaplaza page has malformed JSON-LD") from None
        for part in (data.get("hasPart") or []) if isinstance(data, dict) else []:
            acc = part.get("acceptedAnswer") if isinstance(part, dict) else None
            if isinstance(acc, dict) and isinstance(acc.get("position"), int):
                position = acc["position"]
    if position is None:
        raise PageParseError("triviaplaza page without an accepted answer")
    return [ParsedQuestion(url, "triviaplaza", SUBJECT_NAMES.get(subject, subject), None, skill, problem,
                           img_url, img_alt, choices, curls, calts, position - 1)]
