"""Source specifications as users write them on the command line (CONTRACT.md, Sources).

``demo`` | ``http://HOST:PORT/`` | ``stem-parquet:PATH`` | ``scienceqa:PATH`` |
``jsonl:PATH[?mapping]`` | ``json:PATH[?mapping]`` | ``python:MODULE:FUNCTION[?query]``.
``parse_source_spec`` turns the text into a ``SourceSpec`` or raises ``SourceSpecError`` with
a one-line reason. For ``python:`` the location is ``MODULE:FUNCTION`` (a ``.py`` path made
absolute); the others' is the resolved path.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

KINDS = ("demo", "http", "stem-parquet", "scienceqa", "jsonl", "json", "python")
QUERY_KINDS = ("jsonl", "json", "python")  # kinds that take ``?mapping`` after the location
EXPECTED = "demo, http://HOST:PORT/, stem-parquet:PATH, scienceqa:PATH, jsonl:PATH, json:PATH or python:MODULE:FUNCTION"


class SourceSpecError(ValueError):
    """A source specification that cannot be used; the message is one line."""


@dataclass(frozen=True)
class SourceSpec:
    text: str  # exactly as the user wrote it; recorded as each record's ``source``
    kind: str
    location: str  # base URL for http, a path for file importers, "" for demo
    options: dict[str, str] = field(default_factory=dict)  # the mapping (jsonl, json, python)

    @property
    def slug(self) -> str:
        """A file-system-safe, stable name for this source's folders and partitions."""
        readable = re.sub(r"[^a-zA-Z0-9]+", "-", self.text).strip("-").lower()[:40]
        digest = hashlib.sha256(self.text.encode()).hexdigest()[:8]
        return f"{readable}-{digest}" if readable else digest

    @property
    def is_web(self) -> bool:
        return self.kind in ("demo", "http")


def parse_source_spec(text: str) -> SourceSpec:
    text = (text or "").strip()
    if not text:
        raise SourceSpecError(f"empty source; expected {EXPECTED}")
    if text == "demo":
        return SourceSpec(text, "demo", "")
    if text.startswith(("http://", "https://")):
        parts = urlsplit(text)
        if not parts.hostname:
            raise SourceSpecError(f"source {text!r} has no host")
        base = f"{parts.scheme}://{parts.netloc}{parts.path or '/'}"
        if not base.endswith("/"):
            base += "/"
        return SourceSpec(text, "http", base)
    kind, sep, rest = text.partition(":")
    if not sep or kind not in KINDS:
        raise SourceSpecError(f"unknown source {text!r}; expected {EXPECTED}")
    if not rest:
        raise SourceSpecError(f"source {text!r} needs a path after '{kind}:'")
    options: dict[str, str] = {}
    location = rest
    if kind in QUERY_KINDS and "?" in rest:
        location, _, query = rest.partition("?")
        options = dict(parse_qsl(query, keep_blank_values=True))
    if kind == "python":
        return SourceSpec(text, kind, _python_target(text, location), options)
    path = Path(location).expanduser()
    if not path.exists():
        raise SourceSpecError(f"source {text!r}: path {location} does not exist")
    return SourceSpec(text, kind, str(path.resolve()), options)


def _python_target(text: str, location: str) -> str:
    module, sep, function = location.rpartition(":")
    if not sep or not module or not function.isidentifier():
        raise SourceSpecError(f"source {text!r}: expected python:MODULE:FUNCTION")
    if module.endswith(".py"):
        path = Path(module).expanduser()
        if not path.is_file():
            raise SourceSpecError(f"source {text!r}: file {module} does not exist")
        return f"{path.resolve()}:{function}"
    if not all(part.isidentifier() for part in module.split(".")):
        raise SourceSpecError(f"source {text!r}: {module!r} is not a module name or a .py file")
    return location
