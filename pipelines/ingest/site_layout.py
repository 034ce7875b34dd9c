"""Site layouts: how a quiz site's pages hold their questions, declared in a small YAML file of
CSS selectors instead of Python (README, "Crawling any site").

A layout file (every key but ``name``, ``match``, ``text``, ``options`` and ``answer`` optional)::

    name: mysite                     # recorded as each question's layout
    match: "div.quiz"                # a page is a question page when this finds an element
    question: "div.quiz"             # each match is one question; fields are looked up inside it
    text: "p.question"               # a pick (below): the question text
    image: "img"                     # the question's picture (more than one is refused)
    options: {css: "ul.options > li"}
    answer: {css: "div.solution", is: text}
    subject: {value: math}
    skill: {url: true, part: last_segment}
    breadcrumbs: "nav.crumbs"        # refused when it encloses the question (unclosed tags)
    whitespace: collapse             # keep (default) | collapse: trim lines, one space between words
    links: "ul.questions a"          # links the crawler follows (default: every link)
    pagination: "a[rel=next]"        # more links the crawler follows

A *pick* reads one value: a CSS selector (the first match's text), or a mapping with ``css``
(searched inside the question, or the page with ``scope: page``), ``nth`` (which match, default
0, negative from the end), ``attr`` (an attribute instead of the text), ``url: true`` (the page
URL instead of an element), ``value`` (a constant), ``json_ld`` (a dotted path into the page's
JSON-LD, e.g. ``hasPart.acceptedAnswer.position``), ``exclude`` (elements left out of a text),
then ``part: last_segment`` (the last path segment of a URL) and ``pattern`` (a regex; its first
group; refused at load when it can take exponential time, and each match is cut off after
``PATTERN_SECONDS``, which refuses the page with the reason). Without ``css``, ``url``, ``value`` or ``json_ld`` a pick reads the question element
itself. A list of picks is tried in order; the first value that is not empty wins.

``options``: ``css`` (each match is an option), ``cell`` (selectors tried in order inside each
option for the element that holds its text or picture; ``:scope`` is the option itself), ``label`` (a selector inside each
option for its letter), ``sort_by`` (a numeric attribute giving the order),
``letters_name_images: true`` (options that are bare letters A, B, ... are pictures: the last
images of ``image``, in letter order; the lines of the text holding only their labels leave
it). ``answer`` is a pick plus ``is``: ``index`` (0-based),
``position`` (1-based), ``letter`` (matched against the labels, else A, B, ... by position) or
``text`` (matched against the option texts; with ``joins_options: true`` an answer that is not
among them is one more option, as on Khan Academy exercises).

Where a selector finds nothing on a page the layout matched, the page is refused with a
``PageParseError`` naming the field (the page goes to quarantine).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import regex
import yaml
from selectolax.lexbor import LexborHTMLParser, LexborNode

from pipelines.ingest.importers.text_options import without_options_header
from pipelines.ingest.html_dom import (
    PageParseError,
    ParsedQuestion,
    attr,
    clean,
    encloses,
    image_of,
    node_text,
    subject_name,
)

SHIPPED_PACKAGE = "pipelines.ingest.site_layouts"
DEMO_LAYOUTS = ("ixl", "proprofs", "triviaplaza")  # plain http:// and demo sources try these in order
ANSWER_KINDS = ("index", "position", "letter", "text")
PICK_KEYS = frozenset({"css", "scope", "nth", "attr", "url", "value", "json_ld", "exclude", "part", "pattern"})
LAYOUT_KEYS = frozenset({"name", "match", "question", "text", "image", "options", "answer", "subject", "grade",
                         "skill", "breadcrumbs", "whitespace", "links", "pagination"})
OPTION_KEYS = frozenset({"css", "cell", "label", "sort_by", "letters_name_images"})
LETTER = re.compile(r"^[A-Z]$")
# A pick's ``pattern`` may be slow without being exponential (``(.*)/(.*)/(.*)/q=(\d+)`` on a long URL is
# polynomial: 100 s on 1,000 characters). Every match runs under this time limit; a value that hits it
# refuses the page (quarantined with the reason), never stalls the build.
PATTERN_SECONDS = 0.5
_LABEL = re.compile(r"[(\[]?([A-Z])[)\].:]?")  # a picture's label written beside it: A), (B), C.


def _label_letters(line: str) -> list[str] | None:
    """The letters of a line that holds only pictures' labels (``A)``, ``(B) C.``), with at most
    stray signs beside them (``C) >``, a page's typo); None for any other line."""
    words = line.split()
    found = [_LABEL.fullmatch(word) for word in words]
    if not any(found) or not all(m or not any(ch.isalnum() for ch in word) for m, word in zip(found, words)):
        return None
    return [m.group(1) for m in found if m]


def without_picture_labels(text: str, count: int) -> str:
    """``text`` without the run of lines that hold only the labels ``A`` … of ``count`` option
    pictures, in order (``A) <img><br>B) <img>``: the pictures became the options, and their
    labels name nothing in the text); any other text, or one with two such runs, as it is."""
    lines = text.split("\n")
    expected = [chr(65 + i) for i in range(count)]
    runs, start, letters = [], None, []
    for i, line in enumerate([*lines, ""]):
        found = _label_letters(line) if i < len(lines) else None
        if found is not None:
            start, letters = (i, found) if start is None else (start, letters + found)
            continue
        if start is not None and letters == expected:
            runs.append((start, i))
        start, letters = None, []
    if len(runs) != 1 or runs[0] == (0, len(lines)):
        return text
    first, stop = runs[0]
    return "\n".join(lines[:first] + lines[stop:]).strip()


class LayoutError(ValueError):
    """A layout file that cannot be used; the message is one line."""


@dataclass(frozen=True)
class Pick:
    css: str | None = None
    page_scope: bool = False
    nth: int = 0
    attr: str | None = None
    url: bool = False
    value: str | None = None
    json_ld: tuple[str, ...] = ()
    exclude: str | None = None
    last_segment: bool = False
    pattern: regex.Pattern | None = None  # matched with a time limit (PATTERN_SECONDS)

    def describe(self) -> str:
        if self.css is not None:
            return repr(self.css) + (f" [{self.attr}]" if self.attr else "")
        if self.json_ld:
            return "JSON-LD " + ".".join(self.json_ld)
        return "the question element"


@dataclass(frozen=True)
class Options:
    css: str
    cells: tuple[str, ...] = ()
    label: str | None = None
    sort_by: str | None = None
    letters_name_images: bool = False


@dataclass(frozen=True)
class SiteLayout:
    name: str
    match: tuple[str, ...]
    question: str | None
    text: tuple[Pick, ...]
    image: str | None
    options: Options
    answer: tuple[Pick, ...]
    answer_is: str
    answer_joins_options: bool
    subject: tuple[Pick, ...]
    grade: tuple[Pick, ...]
    skill: tuple[Pick, ...]
    breadcrumbs: str | None
    collapse_space: bool
    links: tuple[str, ...]
    pagination: tuple[str, ...]
    source: str  # where the layout was read from, for messages
    digest: str  # of the file's bytes

    # ---- reading pages -------------------------------------------------------------------
    def matches(self, dom: LexborHTMLParser) -> bool:
        return any(dom.css_first(sel) is not None for sel in self.match)

    @property
    def follow(self) -> tuple[str, ...]:
        """CSS selectors of the links the crawler follows on this site (empty: every link)."""
        return self.links + self.pagination if self.links else ()

    def parse(self, url: str, dom: LexborHTMLParser) -> list[ParsedQuestion]:
        root = dom.root
        if root is None:
            return []
        scopes = dom.css(self.question) if self.question else [root]
        if not scopes:
            raise self._missing("question", repr(self.question))
        return [self._question(url, dom, scope) for scope in scopes]

    def _missing(self, field: str, how: str) -> PageParseError:
        return PageParseError(f"{self.name} page without {field}: {how} found nothing")

    def _question(self, url: str, dom: LexborHTMLParser, scope: LexborNode) -> ParsedQuestion:
        text_node, problem = self._read(self.text, url, dom, scope, "question text")
        if self.breadcrumbs:
            crumbs = dom.css_first(self.breadcrumbs)
            if crumbs is not None and encloses(crumbs, text_node or scope):
                raise PageParseError(f"{self.name} page has breadcrumbs that are not closed before the question")
        images = scope.css(self.image) if self.image else []
        cells, labels = self._option_cells(scope)
        choices, curls, calts = self._option_values(url, cells)
        answer_node, answer = self._read(self.answer, url, dom, scope, "answer")
        answer_idx, choices, curls, calts, images = self._answer(answer, choices, curls, calts, labels, images, url,
                                                                 problem)
        if len(images) > 1:
            raise PageParseError(f"{self.name} page has {len(images)} question images: one is supported")
        if curls is not None and self.options.letters_name_images:
            problem = without_options_header(without_picture_labels(self._tidy(problem), len(curls)))
        img_url, img_alt = image_of(url, images[0] if images else None)
        subject = self._value(self.subject, url, dom, scope)
        grade = self._value(self.grade, url, dom, scope)
        skill = self._value(self.skill, url, dom, scope)
        return ParsedQuestion(url, self.name, subject_name(subject or ""), grade or None, skill or "",
                              self._tidy(problem), img_url, img_alt, choices, curls, calts, answer_idx)

    def _tidy(self, text: str) -> str:
        if not self.collapse_space:
            return clean(text)
        lines = (" ".join(line.split()) for line in text.split("\n"))
        return "\n".join(line for line in lines if line)

    def _option_cells(self, scope: LexborNode) -> tuple[list[LexborNode], list[str]]:
        items = scope.css(self.options.css)
        if self.options.sort_by:
            key = self.options.sort_by

            def order(node):
                value = (attr(node, key) or "").strip()
                return int(value) if value.isdigit() else 0

            items.sort(key=order)
        cells, labels = [], []
        for item in items:
            cell = item
            if self.options.cells:
                found = (item if sel == ":scope" else item.css_first(sel) for sel in self.options.cells)
                cell = next((c for c in found if c is not None), None)
                if cell is None:
                    raise PageParseError(f"{self.name} option without an option cell: "
                                         f"{' or '.join(map(repr, self.options.cells))} found nothing")
            cells.append(cell)
            if self.options.label:
                label = item.css_first(self.options.label)
                labels.append(clean(clean(node_text(label)).rstrip(".")) if label is not None else "")
        ids = {c.mem_id for c in cells}
        for cell in cells:
            node = cell.parent
            while node is not None:
                if node.mem_id in ids:
                    raise PageParseError(f"{self.name} page has options nested inside each other (unclosed tags)")
                node = node.parent
        return cells, labels

    def _option_values(self, url: str, cells: list[LexborNode]):
        """(texts or None, image urls or None, image alts or None) of option cells."""
        imgs = [c.css_first("img") for c in cells]
        if cells and all(i is not None for i in imgs):
            pairs = [image_of(url, i) for i in imgs]
            return None, tuple(p[0] for p in pairs), tuple(p[1] or "" for p in pairs)
        if any(i is not None for i in imgs):
            raise PageParseError(f"{self.name} page mixes text and image options")
        return tuple(self._tidy(node_text(c)) for c in cells), None, None

    def _answer(self, answer: str, choices, curls, calts, labels, images, url: str, problem: str):
        """(answer index, choices, choice image urls, choice alts, question images left)."""
        kind = self.answer_is
        value = clean(answer)
        if kind in ("index", "position"):
            if not value.lstrip("-").isdigit() or len(value) > 9:
                raise PageParseError(f"{self.name} page without a correct-answer index: {value[:40]!r}")
            return int(value) - (kind == "position"), choices, curls, calts, images
        if kind == "letter":
            letter = clean(value.rstrip("."))
            letters = labels or [chr(65 + i) for i in range((len(choices or curls or ())))]
            if letter not in letters:
                raise PageParseError(f"{self.name} correct answer {letter!r} is not one of the options")
            return letters.index(letter), choices, curls, calts, images
        answer_text = self._tidy(answer)
        texts = list(choices or ())
        if answer_text not in texts:
            if not self.answer_joins_options or curls:
                raise PageParseError(f"{self.name} correct answer is not one of the options: {answer_text[:60]!r}")
            # a position fixed by the question, so the answer is not always first or last
            at = int(hashlib.sha256(problem.encode()).hexdigest(), 16) % (len(texts) + 1)
            texts.insert(at, answer_text)
        if self.options.letters_name_images and texts and all(LETTER.match(t) for t in texts):
            letters = sorted(texts)
            if len(set(letters)) != len(letters) or len(images) < len(letters):
                raise PageParseError(f"{self.name} page has letter options without a picture each: "
                                     f"{len(letters)} letters, {len(images)} images")
            pictures = images[len(images) - len(letters):]
            pairs = [image_of(url, i) for i in pictures]
            return (letters.index(answer_text), None, tuple(p[0] for p in pairs), tuple(p[1] or "" for p in pairs),
                    images[: len(images) - len(letters)])
        return texts.index(answer_text), tuple(texts), None, None, images

    # ---- picks ---------------------------------------------------------------------------
    def _value(self, picks: tuple[Pick, ...], url: str, dom, scope) -> str | None:
        for pick in picks:
            found = self._pick(pick, url, dom, scope)
            if found is not None and clean(found[1]):
                return clean(found[1])
        return None

    def _read(self, picks: tuple[Pick, ...], url: str, dom, scope, field: str) -> tuple[LexborNode | None, str]:
        """(element read, value) of a required field; PageParseError naming the field when nothing is found."""
        tried = []
        for pick in picks:
            found = self._pick(pick, url, dom, scope)
            if found is not None:
                return found
            tried.append(pick.describe())
        raise self._missing(field, " or ".join(tried))

    def _pick(self, pick: Pick, url: str, dom, scope) -> tuple[LexborNode | None, str] | None:
        node: LexborNode | None = None
        if pick.value is not None:
            value = pick.value
        elif pick.url:
            value = url
        elif pick.json_ld:
            value = _json_ld_value(dom, pick.json_ld, self.name)
            if value is None:
                return None
        else:
            if pick.css is None:
                node = scope
            else:
                matches = (dom.root if pick.page_scope else scope).css(pick.css)
                if not -len(matches) <= pick.nth < len(matches):
                    return None
                node = matches[pick.nth]
            if pick.attr:
                value = attr(node, pick.attr)
                if value is None:
                    return None
            else:
                excluded = frozenset(n.mem_id for n in node.css(pick.exclude)) if pick.exclude else frozenset()
                value = node_text(node, excluded)
        if pick.last_segment:
            parts = [p for p in urlsplit(value.strip()).path.split("/") if p]
            value = parts[-1] if parts else ""
        if pick.pattern is not None:
            try:
                m = pick.pattern.search(value, timeout=PATTERN_SECONDS)
            except TimeoutError:
                # the reason before ": " is the quarantine's category, the same for every page it skips
                raise PageParseError(f"{self.name} layout pattern took over {PATTERN_SECONDS:g} s (page skipped): "
                                     f"{pick.pattern.pattern[:60]!r} on a {len(value):,}-character value") from None
            if m is None:
                return None
            value = m.group(1) if m.groups() else m.group(0)
        return node, value


def _json_ld_value(dom: LexborHTMLParser, path: tuple[str, ...], layout: str) -> str | None:
    found = None
    for script in dom.css('script[type="application/ld+json"]'):
        try:
            data = json.loads(node_text(script))
        except (ValueError, RecursionError):
            raise PageParseError(f"{layout} page has malformed JSON-LD") from None
        values = [data]
        for key in path:
            nxt = []
            for v in values:
                for item in (v if isinstance(v, list) else [v]):
                    if isinstance(item, dict) and key in item:
                        nxt.append(item[key])
            values = nxt
        for v in values:
            for item in (v if isinstance(v, list) else [v]):
                if isinstance(item, (int, str)) and not isinstance(item, bool):
                    found = str(item)
    return found


# ---- loading -------------------------------------------------------------------------------


def _selectors(value: Any, key: str, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(s, str) and s.strip() for s in items):
        raise LayoutError(f"{where}: {key} must be a CSS selector or a list of them")
    for sel in items:
        if sel == ":scope":
            continue
        try:
            LexborHTMLParser("<html></html>").css_first(sel)
        except Exception as exc:
            raise LayoutError(f"{where}: {key} has an invalid CSS selector {sel!r}: {exc}".splitlines()[0]) from None
    return tuple(items)


def _picks(value: Any, key: str, where: str, required: bool = False) -> tuple[Pick, ...]:
    if value is None:
        if required:
            raise LayoutError(f"{where}: {key} is required")
        return ()
    out = []
    for item in value if isinstance(value, list) else [value]:
        if isinstance(item, str):
            item = {"css": item}
        if not isinstance(item, dict):
            raise LayoutError(f"{where}: {key} must be a selector, a mapping or a list of them")
        unknown = set(item) - PICK_KEYS - ({"is", "joins_options"} if key == "answer" else set())
        if unknown:
            raise LayoutError(f"{where}: {key} has unknown keys: {', '.join(sorted(map(str, unknown)))}")
        pattern = None
        if item.get("pattern") is not None:
            if not isinstance(item["pattern"], (str, int, float)):
                raise LayoutError(f"{where}: {key}.pattern must be a regex")
            try:
                re.compile(str(item["pattern"]))  # Python's syntax, what the check below parses
                pattern = regex.compile(str(item["pattern"]), regex.VERSION0)  # the same syntax, with timeouts
            except (re.error, regex.error, RecursionError, OverflowError) as exc:
                raise LayoutError(f"{where}: {key} has an invalid pattern: {exc}".splitlines()[0]) from None
            slow = _backtracking(str(item["pattern"]))
            if slow:
                raise LayoutError(f"{where}: {key}.pattern {str(item['pattern'])[:80]!r} can take exponential time "
                                  f"({slow}); write it without nesting repeats")
        css = item.get("css")
        if css is not None:
            _selectors(css, key, where)
        exclude = item.get("exclude")
        if exclude is not None:
            _selectors(exclude, key + ".exclude", where)
        if item.get("scope", "question") not in ("question", "page"):
            raise LayoutError(f"{where}: {key}.scope must be question or page")
        if not isinstance(item.get("nth", 0), int):
            raise LayoutError(f"{where}: {key}.nth must be an integer")
        if item.get("part") not in (None, "last_segment"):
            raise LayoutError(f"{where}: {key}.part must be last_segment")
        out.append(Pick(
            css=css, page_scope=item.get("scope") == "page", nth=item.get("nth", 0), attr=item.get("attr"),
            url=bool(item.get("url")), value=None if item.get("value") is None else str(item["value"]),
            json_ld=tuple(str(item["json_ld"]).split(".")) if item.get("json_ld") else (),
            exclude=exclude, last_segment=item.get("part") == "last_segment", pattern=pattern,
        ))
    return tuple(out)


MAX_LAYOUT_CHARS = 256 * 1024


def _backtracking(pattern: str) -> str | None:
    """Why ``pattern`` can backtrack exponentially (a repeat inside an unbounded repeat, or
    alternatives of several characters inside one: ``(a+)+``, ``(\\w+\\s?)*$``, ``(x|xy)*z``), or
    None. Atomic groups and possessive repeats never backtrack and pass."""
    from re import _constants as c, _parser as parser

    repeats = (c.MAX_REPEAT, c.MIN_REPEAT)

    def walk(items, outer_unbounded: bool, outer_repeats: bool) -> str | None:
        for op, av in items:
            if op in repeats:
                low, high, body = av
                unbounded = high == c.MAXREPEAT
                if high > 1 and (outer_unbounded or (outer_repeats and unbounded)):
                    return "a repeat inside a repeat"
                found = walk(body, outer_unbounded or unbounded, outer_repeats or high > 1)
            elif op is c.BRANCH:
                if outer_unbounded and any(len(alt) != 1 for alt in av[1]):
                    return "alternatives inside a repeat"
                found = next((r for alt in av[1] if (r := walk(alt, outer_unbounded, outer_repeats))), None)
            elif op is c.SUBPATTERN:
                found = walk(av[3], outer_unbounded, outer_repeats)
            elif op in (c.ASSERT, c.ASSERT_NOT):
                found = walk(av[1], outer_unbounded, outer_repeats)
            elif op is c.GROUPREF_EXISTS:
                found = walk(av[1], outer_unbounded, outer_repeats) or (av[2] and walk(av[2], outer_unbounded, outer_repeats))
            else:
                found = None
            if found:
                return found
        return None

    return walk(parser.parse(pattern), False, False)


def _refuse_aliases(text: str, source: str) -> None:
    """A layout needs no YAML anchors; an alias is how a 1 KB file expands to gigabytes."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.AliasEvent):
            raise LayoutError(f"{source}: YAML aliases (*{event.anchor}) are not allowed in a layout")


def layout_from_text(text: str, source: str) -> SiteLayout:
    """A layout from YAML text; LayoutError (one line) for anything unusable."""
    if len(text) > MAX_LAYOUT_CHARS:
        raise LayoutError(f"{source}: {len(text):,} characters; a layout has at most {MAX_LAYOUT_CHARS:,}")
    try:
        _refuse_aliases(text, source)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise LayoutError(f"{source}: not valid YAML: {exc}".splitlines()[0]) from None
    if not isinstance(data, dict):
        raise LayoutError(f"{source}: a layout is a mapping of keys (name, match, text, options, answer, ...)")
    unknown = set(data) - LAYOUT_KEYS
    if unknown:
        raise LayoutError(f"{source}: unknown keys: {', '.join(sorted(map(str, unknown)))}")
    for key in ("name", "match", "options", "answer"):
        if data.get(key) is None:
            raise LayoutError(f"{source}: {key} is required")
    name = data["name"]
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9._-]+", name):
        raise LayoutError(f"{source}: name must be a word (letters, digits, . _ -)")
    options = data["options"]
    if isinstance(options, str):
        options = {"css": options}
    if not isinstance(options, dict) or not options.get("css"):
        raise LayoutError(f"{source}: options needs css")
    if set(options) - OPTION_KEYS:
        raise LayoutError(f"{source}: options has unknown keys: {', '.join(sorted(map(str, set(options) - OPTION_KEYS)))}")
    answer = data["answer"]
    first = answer[0] if isinstance(answer, list) and answer else answer
    answer_is = first.get("is", "index") if isinstance(first, dict) else "index"
    if answer_is not in ANSWER_KINDS:
        raise LayoutError(f"{source}: answer.is must be one of {', '.join(ANSWER_KINDS)}")
    whitespace = data.get("whitespace", "keep")
    if whitespace not in ("keep", "collapse"):
        raise LayoutError(f"{source}: whitespace must be keep or collapse")
    question = _selectors(data.get("question"), "question", source)
    image = _selectors(data.get("image"), "image", source)
    breadcrumbs = _selectors(data.get("breadcrumbs"), "breadcrumbs", source)
    return SiteLayout(
        name=name,
        match=_selectors(data["match"], "match", source),
        question=", ".join(question) or None,
        text=_picks(data.get("text"), "text", source, required=True),
        image=", ".join(image) or None,
        options=Options(
            css=", ".join(_selectors(options["css"], "options.css", source)),
            cells=_selectors(options.get("cell"), "options.cell", source),
            label=", ".join(_selectors(options.get("label"), "options.label", source)) or None,
            sort_by=options.get("sort_by"),
            letters_name_images=bool(options.get("letters_name_images")),
        ),
        answer=_picks(answer, "answer", source, required=True),
        answer_is=answer_is,
        answer_joins_options=bool(first.get("joins_options")) if isinstance(first, dict) else False,
        subject=_picks(data.get("subject"), "subject", source),
        grade=_picks(data.get("grade"), "grade", source),
        skill=_picks(data.get("skill"), "skill", source),
        breadcrumbs=", ".join(breadcrumbs) or None,
        collapse_space=whitespace == "collapse",
        links=_selectors(data.get("links"), "links", source),
        pagination=_selectors(data.get("pagination"), "pagination", source),
        source=source,
        digest=hashlib.sha256(text.encode()).hexdigest(),
    )


def shipped_layout_names() -> list[str]:
    return sorted(p.name[:-5] for p in resources.files(SHIPPED_PACKAGE).iterdir() if p.name.endswith(".yaml"))


@functools.lru_cache(maxsize=None)
def shipped_layout(name: str) -> SiteLayout:
    resource = resources.files(SHIPPED_PACKAGE) / f"{name}.yaml"
    if not resource.is_file():
        raise LayoutError(f"no layout file {name!r}; shipped layouts: {', '.join(shipped_layout_names())}")
    return layout_from_text(resource.read_text(encoding="utf-8"), f"layout {name}")


def default_layouts() -> tuple[SiteLayout, ...]:
    """The demo site's layouts, tried in order on sources that name no layout."""
    return tuple(shipped_layout(name) for name in DEMO_LAYOUTS)


def resolve_layout(text: str) -> str:
    """What a source's ``layout=`` names, as recorded: an absolute file path (relative paths are
    taken against the current directory), or the name of a shipped layout. LayoutError otherwise."""
    path = Path(text).expanduser()
    if path.is_file():
        return str(path.resolve())
    if re.fullmatch(r"[A-Za-z0-9_-]+", text) and text in shipped_layout_names():
        return text
    raise LayoutError(f"layout {text!r} is neither a file nor a shipped layout ({', '.join(shipped_layout_names())})")


def load_layout(resolved: str) -> SiteLayout:
    """The layout a source names (see ``resolve_layout``)."""
    if "/" not in resolved and "\\" not in resolved:
        return shipped_layout(resolved)
    try:
        text = Path(resolved).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LayoutError(f"layout file {resolved} cannot be read: {exc}".splitlines()[0]) from None
    return layout_from_text(text, f"layout file {resolved}")
