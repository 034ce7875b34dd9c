"""Questions from schema.org ``Quiz``/``Question``/``Answer`` markup (JSON-LD and microdata, read
by ``extruct``): Google's practice-problem markup, understood without a layout file.

A ``Quiz`` holds its questions in ``hasPart``; a ``Question`` outside a quiz counts too. Each
question needs ``text`` (or ``name``), one ``acceptedAnswer`` and at least one
``suggestedAnswer``; ``eduQuestionType``, when given, must be multiple choice. The options are
the answers ordered by ``position`` when every answer has one; otherwise the suggested answers
in document order with the accepted answer at a position fixed by the question text. Answers
carry ``text`` or ``image``. ``image`` of the question is its picture. The subject comes from an
``educationalAlignment`` of type ``educationalSubject`` (else ``about``), the grade from
``educationalLevel`` (property or alignment), the skill from ``about`` (else the quiz ``name``).
"""

from __future__ import annotations

import hashlib
import re
from urllib.parse import urljoin

from pipelines.ingest.html_dom import (
    PageParseError,
    ParsedQuestion,
    PictureInMarkup,
    clean,
    from_standins,
    markup_text,
    subject_name,
    to_standins,
)

LAYOUT = "schema.org"
_SUBJECTS = {"physics": "science", "chemistry": "science", "biology": "science", "computer science": "technology",
             "computing": "technology", "maths": "math"}
_MARKERS = re.compile(r"application/ld\+json|itemtype", re.I)


def _type(item) -> str:
    kinds = item.get("@type") if isinstance(item, dict) else None
    kinds = kinds if isinstance(kinds, list) else [kinds]
    names = [re.split(r"[/:#]", k)[-1] for k in kinds if isinstance(k, str)]
    return "Quiz" if "Quiz" in names else "Question" if "Question" in names else names[0] if names else ""


def _list(value) -> list:
    return [] if value is None else value if isinstance(value, list) else [value]


def _text(value) -> str:
    for item in _list(value):
        if isinstance(item, str):
            return clean(from_standins(item))
        if isinstance(item, dict):
            found = _text(item.get("name") or item.get("text") or item.get("@value"))
            if found:
                return found
    return ""


def _image_urls(url: str, value) -> list[str]:
    out = []
    for item in _list(value):
        if isinstance(item, dict):
            item = item.get("contentUrl") or item.get("url")
            item = item[0] if isinstance(item, list) and item else item
        if isinstance(item, str) and item.strip():
            out.append(urljoin(url, item.strip()))
    return out


def _items(data: dict) -> list[dict]:
    out = []
    for item in data.get("json-ld", []) + data.get("microdata", []):
        for entry in _list(item.get("@graph")) or [item] if isinstance(item, dict) else []:
            if isinstance(entry, dict):
                out.append(entry)
    return out


def schema_org_questions(url: str, html: str) -> list[ParsedQuestion]:
    """The multiple-choice questions a page marks up with schema.org ([] if none)."""
    if not _MARKERS.search(html) or "Question" not in html:
        return []
    import extruct

    try:
        data = extruct.extract(to_standins(html), base_url=url, syntaxes=["json-ld", "microdata"],
                               uniform=True, errors="strict")
    except Exception as exc:
        raise PageParseError(f"schema.org page has malformed markup: {type(exc).__name__}".splitlines()[0]) from None
    questions = []
    for item in _items(data):
        kind = _type(item)
        if kind == "Quiz":
            for part in _list(item.get("hasPart")):
                if _type(part) == "Question":
                    questions.append(_question(url, part, item))
        elif kind == "Question":
            questions.append(_question(url, item, {}))
    return questions


def _alignment(quiz: dict, question: dict, kind: str) -> str:
    for holder in (question, quiz):
        for item in _list(holder.get("educationalAlignment")):
            if isinstance(item, dict) and _text(item.get("alignmentType")).lower() == kind.lower():
                return _text(item.get("targetName"))
    return ""


def _shown(text: str) -> str:
    """A JSON-LD text as a reader sees it: schema.org's ``text`` may be written in HTML
    (``What is 3<sup>2</sup>?``, ``&quot;``; ``html_dom.markup_text``)."""
    try:
        return markup_text(text)
    except PictureInMarkup as exc:
        raise PageParseError(f"schema.org text holds a picture in its HTML: {str(exc)[:80]}") from None


def _question(url: str, question: dict, quiz: dict) -> ParsedQuestion:
    kind = _text(question.get("eduQuestionType"))
    if kind and kind.lower().replace("-", " ") not in ("multiple choice", "multiplechoice"):
        raise PageParseError(f"schema.org question is not multiple choice: {kind}")
    problem = _shown(_text(question.get("text")) or _text(question.get("name")))
    accepted = [a for a in _list(question.get("acceptedAnswer")) if isinstance(a, dict)]
    suggested = [a for a in _list(question.get("suggestedAnswer")) if isinstance(a, dict)]
    if len(accepted) != 1:
        raise PageParseError(f"schema.org question without exactly one accepted answer: {len(accepted)}")
    answers = list(suggested)
    positions = [_position(a) for a in accepted + suggested]
    if all(p is not None for p in positions) and len(set(positions)) == len(positions):
        answers = sorted(accepted + suggested, key=_position)
    else:
        at = int(hashlib.sha256(problem.encode()).hexdigest(), 16) % (len(suggested) + 1)
        answers.insert(at, accepted[0])
    answer_idx = next(i for i, a in enumerate(answers) if a is accepted[0])
    texts = [_shown(_text(a.get("text"))) for a in answers]
    pictures = [_image_urls(url, a.get("image")) for a in answers]
    choices = curls = None
    if all(texts):
        choices = tuple(texts)
    elif all(len(p) == 1 for p in pictures):
        curls = tuple(p[0] for p in pictures)
    else:
        raise PageParseError("schema.org answers are neither all text nor all one image each")
    images = _image_urls(url, question.get("image"))
    if len(images) > 1:
        raise PageParseError(f"schema.org question has {len(images)} images: one is supported")
    about = _text(quiz.get("about")) or _text(question.get("about"))
    subject = _alignment(quiz, question, "educationalSubject")
    grade = _text(quiz.get("educationalLevel")) or _text(question.get("educationalLevel")) or _alignment(
        quiz, question, "educationalLevel")
    if not subject:
        subject, about = about, ""
    skill = about or _text(quiz.get("name"))
    subject = subject_name(subject)
    return ParsedQuestion(
        url, LAYOUT, _SUBJECTS.get(subject, subject), grade or None, _slug(skill), problem,
        images[0] if images else None, "" if images else None, choices, curls,
        tuple("" for _ in curls) if curls else None, answer_idx,
    )


def _position(answer: dict) -> int | None:
    value = _text(answer.get("position")) if not isinstance(answer.get("position"), int) else str(answer["position"])
    return int(value) if value.lstrip("-").isdigit() and len(value) < 10 else None


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
