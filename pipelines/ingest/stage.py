"""Ingest: run every configured source and land raw questions in the lake.

A web source (``demo`` or ``http://...``) is crawled into its raw store, then each stored
page is parsed with its site layouts (``?layout=FILE``, else the demo site's three); an importer source is read file by file. Either
way each source yields ``RawQuestion`` and ``QuarantineEntry`` records, which land as
``lake/raw_questions/<source>.parquet`` and ``lake/quarantine/ingest-<source>.parquet``.
Rows are sorted by ``source_key`` so the same input gives the same bytes.

Each source is memoized on its own (``lake/state/fingerprints/ingest-<slug>.json``, see
``pipelines/incremental.py``): a web source is parsed again only when its raw store's
content digest changed (URL, state and body hash of every URL but the sitemaps); a file
source is imported again only when the content of one of its files changed (a file whose
size and mtime are unchanged is not read again; a touched file is hashed and
compared). The files of a source are: the shards of a ``stem-parquet`` source; every
file under the folder of a ``scienceqa`` source's ``problems.json``; the data files of a
``jsonl`` or ``json`` source and every file under the folder its images resolve in (the
data file's folder, or its ``image_root``), the data home excepted: each kind declares its
files where it is registered (``pipelines.ingest.sources``). A folder of more than
``MAX_WATCHED_FILES`` files cannot be fingerprinted cheaply: such a source is imported
every time, and so is a ``python:`` source (what its function reads is unknown).

A file source that lands no usable question, or whose mapping names a field that none of
its records has, is unusable: ``source_problem`` gives the one line that fails the build
(``source json:...: 0 of 212 records usable; commonest reason: image file not found (212)``).
A web source that lands no question (a site that stopped matching its layouts, or went away)
fails the build the same way, so the previous release stays.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import polars as pl

from pipelines.store.code_deps import code_digest_of
from pipelines.store.home import DataHome
from pipelines.store.images import ImageRejected, ImageStore
from pipelines.store.lake import write_table
from pipelines.store.records import (
    QUARANTINE_SCHEMA,
    RAW_QUESTION_SCHEMA,
    QuarantineEntry,
    RawQuestion,
    Record,
    validate_raw_question,
    with_clean_text,
)
from pipelines.settings import BuildSettings
from pipelines.ingest.sources import source_kind
from pipelines.ingest.spec import SourceSpec

DEMO_CANONICAL_BASE = "http://demo.localhost/"


@dataclass
class SourceOutcome:
    source: str
    questions: int = 0
    quarantined: int = 0
    crawl: dict = field(default_factory=dict)
    question_file: Path | None = None
    quarantine_file: Path | None = None
    skipped: bool = False  # inputs unchanged since the last landing: the lake files were kept


def raw_store_dir(home: DataHome, spec: SourceSpec) -> Path:
    return home.raw / spec.slug


@contextlib.contextmanager
def web_endpoint(spec: SourceSpec, settings: BuildSettings) -> Iterator[tuple[str, str]]:
    """(base URL to request, canonical base to record) for a web source.

    For ``demo`` this starts the bundled site on a free loopback port for the duration.
    """
    if spec.kind == "demo":
        from pipelines.ingest.demo_site.generator import SiteConfig
        from pipelines.ingest.demo_site.server import start_site

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


def crawl_revalidate_mode(settings: BuildSettings) -> str:
    """How a build's crawl revalidates known pages: ``lastmod`` (default) or ``all``."""
    if settings.crawl_revalidate not in ("lastmod", "all"):
        raise ValueError(f"crawl_revalidate must be 'lastmod' or 'all', got {settings.crawl_revalidate!r}")
    return settings.crawl_revalidate


def crawl_max_urls(spec: SourceSpec, settings: BuildSettings) -> int:
    """A web source's crawl budget: its own ``max_urls=N``, else the build's ``crawl_max_urls``."""
    value = spec.options.get("max_urls", settings.crawl_max_urls)
    if isinstance(value, bool) or not str(value).isdigit() or int(value) < 1:
        raise ValueError(f"source {spec.text!r}: max_urls must be a whole number of at least 1, got {value!r}")
    return int(value)


def crawl_web_source(spec: SourceSpec, settings: BuildSettings, home: DataHome, progress: bool = True) -> dict:
    """Crawl one web source into its raw store; returns the crawl report as a dict.

    Builds crawl with ``revalidate='lastmod'`` unless the settings say otherwise: known
    pages whose sitemap lastmod is unchanged are not requested (see ``pipelines/crawl``).
    """
    from pipelines.ingest.crawl import CrawlConfig, crawl

    with web_endpoint(spec, settings) as (base_url, canonical_base):
        config = CrawlConfig(
            base_url=base_url,
            canonical_base=canonical_base,
            rate_per_host=settings.crawl_rate_per_host,
            concurrency=settings.crawl_concurrency,
            timeout=settings.crawl_timeout,
            progress=progress,
            revalidate=crawl_revalidate_mode(settings),
            max_urls=crawl_max_urls(spec, settings),
            follow=tuple(sel for layout in source_layouts(spec) for sel in layout.follow),
        )
        report = crawl(config, raw_store_dir(home, spec))
    return report.as_dict() if hasattr(report, "as_dict") else dict(vars(report))


def quarantine_reason(message: str) -> tuple[str, str | None]:
    """A stable quarantine ``reason`` and the specifics for ``detail``: a message
    ``category: specifics`` splits at its first ": " (URLs, values and exception text go to
    the detail, so one kind of problem is one group)."""
    category, separator, specifics = message.partition(": ")
    return (category, specifics) if separator and category else (message, None)


def _web_quarantine(spec: SourceSpec, key: str, stage: str, message: str, url: str | None = None) -> QuarantineEntry:
    reason, detail = quarantine_reason(message)
    if url is not None:
        detail = url if detail is None else f"{url}: {detail}"
    return QuarantineEntry(spec.text, key, stage, reason, detail)


def source_layouts(spec: SourceSpec):
    """The site layouts a web source is read with: its ``layout=`` file, else the demo site's."""
    from pipelines.ingest.site_layout import default_layouts, load_layout

    return (load_layout(spec.options["layout"]),) if spec.options.get("layout") else default_layouts()


def parse_web_source(spec: SourceSpec, home: DataHome, images: ImageStore) -> Iterator[Record]:
    """Parse every stored page of a crawled source into records."""
    from pipelines.ingest.crawl import RawStore
    from pipelines.ingest.html_dom import decode_page, header_charset
    from pipelines.ingest.web_parsers import PageParseError, parse_page

    layouts = source_layouts(spec)
    store = RawStore(raw_store_dir(home, spec))
    failed_urls: dict[str, str] = dict(store.failures())
    for url, reason in sorted(failed_urls.items()):
        yield _web_quarantine(spec, url, "crawl", reason)
    for url, body in store.iter_pages(content_type_prefix="text/html"):
        try:
            # the HTTP header's charset comes before the page's own (a Latin-1 page declared only there)
            parsed = parse_page(url, decode_page(body, header_charset(store.content_type(url))), layouts)
        except PageParseError as exc:
            yield _web_quarantine(spec, url, "parse", str(exc))
            continue
        for position, pq_ in enumerate(parsed):
            key = url if len(parsed) == 1 else f"{url}#{position}"
            yield from _web_question(spec, key, pq_, store, images, failed_urls)


def _fetch_image(url: str, store, images: ImageStore, failed_urls: dict[str, str]) -> str:
    if url.startswith("data:"):  # a picture written in the page itself
        from pipelines.ingest.importers.common import RecordProblem
        from pipelines.ingest.importers.paths import image_in_text

        try:
            body = image_in_text(url)
        except RecordProblem as exc:
            raise ImageRejected(f"image unavailable ({exc.reason}): {url[:80]}") from None
        if body is None:
            raise ImageRejected(f"image unavailable (not a picture's data URI): {url[:80]}")
        return images.put(body).image_hash
    body = store.get_body(url)
    if body is None:
        category, specifics = quarantine_reason(failed_urls.get(url, "not in the raw store"))
        raise ImageRejected(f"image unavailable ({category}): {url}" + (f": {specifics}" if specifics else ""))
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
        yield _web_quarantine(spec, key, "parse", str(exc))
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
        from pipelines.ingest.importers import iter_import_records

        yield from iter_import_records(spec, images)


def question_file(home: DataHome, spec: SourceSpec) -> Path:
    return home.lake / "raw_questions" / f"{spec.slug}.parquet"


def quarantine_file(home: DataHome, spec: SourceSpec) -> Path:
    return home.lake / "quarantine" / f"ingest-{spec.slug}.parquet"


def ingest_stage_name(spec: SourceSpec) -> str:
    return f"ingest-{spec.slug}"


def source_files(spec: SourceSpec, home: DataHome) -> list[Path] | None:
    """The files a file source reads, as its kind declares them (``watch`` in
    ``@register_source``); None when they cannot be watched (too many, or unknown). An
    unreadable location gives [] (the import then fails with its reason)."""
    kind = source_kind(spec.kind)
    if kind is None or kind.web:
        return []
    try:
        return kind.watch(spec, home.root.resolve())
    except (ValueError, OSError):
        return []


def one_line_reason(reason: str) -> str:
    return " ".join(str(reason).split())[:200]


def source_problem(spec: SourceSpec, outcome: SourceOutcome) -> str | None:
    """Why a landed source is unusable, in one line, or None (a web source: no question at all).

    Unusable: a mapped field that none of its records has (the commonest cause of an empty
    column), or no usable question at all (named with the commonest quarantine reason).
    """
    from pipelines.ingest.importers.rows import MAPPED_FIELD_UNUSED

    quarantine = pl.read_parquet(outcome.quarantine_file, columns=["reason", "detail"])
    if spec.is_web:
        if outcome.questions:
            return None
        # a site that stopped matching its layouts (or that went away) must not publish an empty release
        pages = "no question matched its layouts"
        if quarantine.height:
            reason, n = quarantine.group_by("reason").len().sort(["len", "reason"], descending=[True, False]).row(0)
            pages += f"; commonest reason: {one_line_reason(reason)} ({n:,})"
        return f"source {spec.text}: {pages}"
    unused = quarantine.filter(pl.col("reason") == MAPPED_FIELD_UNUSED)
    reasons = quarantine.filter(pl.col("reason") != MAPPED_FIELD_UNUSED)
    records = outcome.questions + reasons.height
    if records == 0:
        return f"source {spec.text}: no records"
    commonest = ""
    if outcome.questions == 0:
        counts = reasons.group_by("reason").len().sort(["len", "reason"], descending=[True, False])
        reason, n = counts.row(0)
        commonest = f"commonest reason: {reason} ({n:,})"
    if unused.height:
        fields = unused["detail"].to_list()
        named = f"mapped field {fields[0]} is" if len(fields) == 1 else f"mapped fields {', '.join(fields)} are"
        # nothing usable: the reason may be the file's (a layout it cannot read), not the field
        return f"source {spec.text}: {named} in none of its {records:,} records" + (f"; {commonest}" if commonest else "")
    if commonest:
        return f"source {spec.text}: 0 of {records:,} records usable; {commonest}"
    return None


def raw_store_digest(spec: SourceSpec, home: DataHome) -> str | None:
    """The digest of a web source's raw store (None if it was never crawled)."""
    from pipelines.ingest.crawl import RawStore, RawStoreError

    try:
        with RawStore(raw_store_dir(home, spec)) as store:
            return store.content_digest()
    except RawStoreError:
        return None


def ingest_fingerprint_args(spec: SourceSpec, home: DataHome) -> dict:
    """What a source's landing depends on, as keyword arguments of ``pipelines.store.memo.check_stage``."""
    outputs = [question_file(home, spec), quarantine_file(home, spec)]
    settings = {"source": spec.text, "options": dict(sorted(spec.options.items()))}
    if spec.is_web:
        return dict(outputs=outputs, settings=settings, code=_land,
                    extra={"raw_store": raw_store_digest(spec, home),
                           "layouts": [layout.digest for layout in source_layouts(spec)]})
    files = source_files(spec, home)
    kind = source_kind(spec.kind)
    # the reader's module is found by the registry, not imported by name: its code counts here
    reader = {"reader_code": code_digest_of(kind.read)} if kind is not None and kind.read is not None else {}
    if files is None:  # too many files to watch: never considered unchanged
        return dict(outputs=outputs, settings=settings, code=_land, extra={"unwatched": os.urandom(16).hex(), **reader})
    return dict(outputs=outputs, settings=settings, code=_land, inputs=files, extra=reader or None)


def land_source(spec: SourceSpec, home: DataHome, images: ImageStore) -> SourceOutcome:
    """Validate a source's records and write its raw questions and quarantine to the lake,
    unless the source is unchanged since it last landed (then ``skipped`` is True)."""
    from pipelines.store.memo import memoized

    figures = memoized(home, ingest_stage_name(spec), lambda: _land(spec, home, images), **ingest_fingerprint_args(spec, home))
    return SourceOutcome(
        spec.text, figures["questions"], figures["quarantined"],
        question_file=question_file(home, spec), quarantine_file=quarantine_file(home, spec),
        skipped=figures["skipped"],
    )


def _land(spec: SourceSpec, home: DataHome, images: ImageStore) -> dict:
    questions: list[dict] = []
    quarantined: list[dict] = []
    for record in source_records(spec, home, images):
        if isinstance(record, RawQuestion):
            record = with_clean_text(record)
            problem = validate_raw_question(record)
            row = record.to_row()
            if problem is None:
                problem = _lone_surrogate(row)
            if problem is None:
                questions.append(row)
            else:
                quarantined.append(_valid_unicode(QuarantineEntry(record.source, record.source_key, "ingest", problem).to_row()))
        else:
            quarantined.append(_valid_unicode(record.to_row()))
    q = pl.from_arrow(_table(questions, RAW_QUESTION_SCHEMA)).sort("source_key")
    z = pl.from_arrow(_table(quarantined, QUARANTINE_SCHEMA)).sort("stage", "source_key", "reason")
    write_table(q, question_file(home, spec))
    write_table(z, quarantine_file(home, spec))
    return {"questions": len(questions), "quarantined": len(quarantined)}


_SURROGATE = re.compile("[\ud800-\udfff]")


def _lone_surrogate(row: dict) -> str | None:
    """Why a row cannot be stored as UTF-8 (a lone surrogate such as a JSON ``\\ud800`` escape), or None."""
    def bad(value) -> bool:
        if isinstance(value, str):
            return _SURROGATE.search(value) is not None
        if isinstance(value, dict):
            return any(bad(k) or bad(v) for k, v in value.items())
        if isinstance(value, (list, tuple)):
            return any(bad(v) for v in value)
        return False

    fields = [name for name, value in row.items() if bad(value)]
    return f"lone surrogate (not valid Unicode) in {', '.join(fields)}" if fields else None


def _valid_unicode(row: dict) -> dict:
    """A quarantine row with any lone surrogate written as its escape, so the entry can be stored."""
    return {k: _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", v) if isinstance(v, str) else v
            for k, v in row.items()}


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
    from pipelines.store.memo import fingerprint_dir

    for path in list(fingerprint_dir(home).glob("ingest-*.json")):
        if path.stem.removeprefix("ingest-") not in keep:
            path.unlink()
    return removed
