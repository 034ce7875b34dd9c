"""Ingest: run every configured source and land raw questions in the lake.

A web source (``demo`` or ``http://...``) is crawled into its raw store, then each stored
page is parsed with the layout parsers; an importer source is read file by file. Either
way each source yields ``RawQuestion`` and ``QuarantineEntry`` records, which land as
``lake/raw_questions/<source>.parquet`` and ``lake/quarantine/ingest-<source>.parquet``.
Rows are sorted by ``source_key`` so the same input gives the same bytes.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import polars as pl

from .home import DataHome
from .images import ImageRejected, ImageStore
from .lake import write_table
from .records import (
    QUARANTINE_SCHEMA,
    RAW_QUESTION_SCHEMA,
    QuarantineEntry,
    RawQuestion,
    Record,
    validate_raw_question,
)
from .settings import BuildSettings
from .sources.spec import SourceSpec

DEMO_CANONICAL_BASE = "http://demo.localhost/"

Progress = Callable[[str], None]


@dataclass
class SourceOutcome:
    source: str
    questions: int = 0
    quarantined: int = 0
    crawl: dict = field(default_factory=dict)
    question_file: Path | None = None
    quarantine_file: Path | None = None


def raw_store_dir(home: DataHome, spec: SourceSpec) -> Path:
    return home.raw / spec.slug


@contextlib.contextmanager
def web_endpoint(spec: SourceSpec, settings: BuildSettings) -> Iterator[tuple[str, str]]:
    """(base URL to request, canonical base to record) for a web source.

    For ``demo`` this starts the bundled site on a free loopback port for the duration.
    """
    if spec.kind == "demo":
        from .demo_site.generator import SiteConfig
        from .demo_site.server import start_site

        config = SiteConfig(
            seed=settings.seed,
            questions=settings.demo_questions,
            faults=settings.demo_faults,
            revision=settings.demo_revision,
        )
        with start_site(config, host="127.0.0.1", port=0) as site:
            yield site.base_url, DEMO_CANONICAL_BASE
    else:
        yield spec.location, spec.location


def crawl_web_source(spec: SourceSpec, settings: BuildSettings, home: DataHome, progress: bool = True) -> dict:
    """Crawl one web source into its raw store; returns the crawl report as a dict."""
    from .crawl import CrawlConfig, crawl

    with web_endpoint(spec, settings) as (base_url, canonical_base):
        config = CrawlConfig(
            base_url=base_url,
            canonical_base=canonical_base,
            rate_per_host=settings.crawl_rate_per_host,
            concurrency=settings.crawl_concurrency,
            timeout=settings.crawl_timeout,
            progress=progress,
        )
        report = crawl(config, raw_store_dir(home, spec))
    return report.as_dict() if hasattr(report, "as_dict") else dict(vars(report))


def parse_web_source(spec: SourceSpec, home: DataHome, images: ImageStore) -> Iterator[Record]:
    """Parse every stored page of a crawled source into records."""
    from .crawl import RawStore
    from .sources.web_parsers import PageParseError, parse_page

    store = RawStore(raw_store_dir(home, spec))
    failed_urls: dict[str, str] = dict(store.failures())
    for url, reason in sorted(failed_urls.items()):
        yield QuarantineEntry(spec.text, url, "crawl", reason)
    for url, body in store.iter_pages(content_type_prefix="text/html"):
        try:
            parsed = parse_page(url, body)
        except PageParseError as exc:
            yield QuarantineEntry(spec.text, url, "parse", str(exc))
            continue
        for position, pq_ in enumerate(parsed):
            key = url if len(parsed) == 1 else f"{url}#{position}"
            yield from _web_question(spec, key, pq_, store, images, failed_urls)


def _fetch_image(url: str, store, images: ImageStore, failed_urls: dict[str, str]) -> str:
    body = store.get_body(url)
    if body is None:
        reason = failed_urls.get(url, "not in the raw store")
        raise ImageRejected(f"image {url} unavailable: {reason}")
    return images.put(body).image_hash


def _web_question(spec, key, parsed, store, images, failed_urls) -> Iterator[Record]:
    try:
        problem_image = (
            _fetch_image(parsed.problem_image_url, store, images, failed_urls) if parsed.problem_image_url else None
        )
        choice_images = (
            tuple(_fetch_image(u, store, images, failed_urls) for u in parsed.choice_image_urls)
            if parsed.choice_image_urls
            else None
        )
    except ImageRejected as exc:
        yield QuarantineEntry(spec.text, key, "parse", str(exc))
        return
    extra = {"layout": parsed.layout}
    if parsed.problem_image_alt is not None or parsed.choice_image_alts:
        extra["image_alts"] = {
            "problem": parsed.problem_image_alt,
            "choices": list(parsed.choice_image_alts) if parsed.choice_image_alts else None,
        }
    yield RawQuestion(
        source=spec.text,
        source_key=key,
        subject=parsed.subject,
        grade=parsed.grade,
        skill=parsed.skill,
        problem=parsed.problem,
        problem_image=problem_image,
        choices=tuple(parsed.choices) if parsed.choices else None,
        choice_images=choice_images,
        answer_idx=parsed.answer_idx,
        extra=extra,
    )


def source_records(spec: SourceSpec, home: DataHome, images: ImageStore) -> Iterator[Record]:
    if spec.is_web:
        yield from parse_web_source(spec, home, images)
    else:
        from .sources.importers import iter_import_records

        yield from iter_import_records(spec, images)


def land_source(spec: SourceSpec, home: DataHome, images: ImageStore) -> SourceOutcome:
    """Validate a source's records and write its raw questions and quarantine to the lake."""
    questions: list[dict] = []
    quarantined: list[dict] = []
    for record in source_records(spec, home, images):
        if isinstance(record, RawQuestion):
            problem = validate_raw_question(record)
            if problem is None:
                questions.append(record.to_row())
            else:
                quarantined.append(QuarantineEntry(record.source, record.source_key, "ingest", problem).to_row())
        else:
            quarantined.append(record.to_row())
    outcome = SourceOutcome(spec.text, len(questions), len(quarantined))
    q = pl.from_arrow(_table(questions, RAW_QUESTION_SCHEMA)).sort("source_key")
    z = pl.from_arrow(_table(quarantined, QUARANTINE_SCHEMA)).sort("stage", "source_key", "reason")
    outcome.question_file = write_table(q, home.lake / "raw_questions" / f"{spec.slug}.parquet")
    outcome.quarantine_file = write_table(z, home.lake / "quarantine" / f"ingest-{spec.slug}.parquet")
    return outcome


def _table(rows: list[dict], schema):
    import pyarrow as pa

    return pa.Table.from_pylist(rows, schema=schema)


def remove_stale_sources(home: DataHome, specs: list[SourceSpec]) -> list[str]:
    """Delete lake files of sources that are no longer configured."""
    keep = {s.slug for s in specs}
    removed = []
    for path in list((home.lake / "raw_questions").glob("*.parquet")):
        if path.stem not in keep:
            path.unlink()
            removed.append(path.stem)
    for path in list((home.lake / "quarantine").glob("ingest-*.parquet")):
        if path.stem.removeprefix("ingest-") not in keep:
            path.unlink()
    return removed
