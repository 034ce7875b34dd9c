"""Source specifications as users write them on the command line (README, Sources).

``demo`` | ``http://HOST:PORT/[?layout=FILE][&max_urls=N]`` | ``stem-parquet:PATH`` | ``scienceqa:PATH`` |
``jsonl:PATH[?mapping]`` | ``json:PATH[?mapping]`` | ``python:MODULE:FUNCTION[?query]``.
``parse_source_spec`` turns the text into a ``SourceSpec`` or raises ``SourceSpecError`` with
a one-line reason. The kinds and how each checks its location are declared in
``pipelines.ingest.sources``, and so is ``SourceSpec`` (imported here for the callers that
name it from this module): this module imports that one, never the reverse. For ``python:``
the location is ``MODULE:FUNCTION`` (a ``.py`` path made absolute); the others' is the
resolved path.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

from pipelines.ingest.sources import SourceLocationError, SourceSpec, expected_sources, source_kind

__all__ = ["SourceSpec", "SourceSpecError", "parse_source_spec"]


class SourceSpecError(ValueError):
    """A source specification that cannot be used; the message is one line."""


def parse_source_spec(text: str) -> SourceSpec:
    text = (text or "").strip()
    if not text:
        raise SourceSpecError(f"empty source; expected {expected_sources()}")
    if text == "demo":
        return SourceSpec(text, "demo", "")
    if text.startswith(("http://", "https://")):
        parts = urlsplit(text)
        if not parts.hostname:
            raise SourceSpecError(f"source {text!r} has no host")
        base = f"{parts.scheme}://{parts.netloc}{parts.path or '/'}"
        if not base.endswith("/"):
            base += "/"
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        options: dict[str, str] = {}
        if "max_urls" in query:
            budget = query["max_urls"].strip()
            if not budget.isdigit() or int(budget) < 1 or len(budget) > 12:
                raise SourceSpecError(f"source {text!r}: max_urls must be a whole number of at least 1, "
                                      f"got {query['max_urls'][:40]!r}")
            options["max_urls"] = str(int(budget))
        layout = query.get("layout")
        if layout is not None:
            from pipelines.ingest.site_layout import LayoutError, load_layout, resolve_layout

            try:
                resolved = resolve_layout(layout)
                load_layout(resolved)
            except LayoutError as exc:
                raise SourceSpecError(f"source {text!r}: {exc}") from None
            options["layout"] = resolved
        return SourceSpec(text, "http", base, options)
    name, sep, rest = text.partition(":")
    kind = source_kind(name) if sep else None
    if kind is None or kind.web:
        raise SourceSpecError(f"unknown source {text!r}; expected {expected_sources()}")
    if not rest:
        raise SourceSpecError(f"source {text!r} needs a path after '{name}:'")
    options: dict[str, str] = {}
    location = rest
    if kind.query and "?" in rest:
        location, _, query = rest.partition("?")
        options = dict(parse_qsl(query, keep_blank_values=True))
    try:
        return SourceSpec(text, name, kind.location(location), options)
    except SourceLocationError as exc:
        raise SourceSpecError(f"source {text!r}: {exc}") from None
