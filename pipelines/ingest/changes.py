"""Source change detection, what the ``source_change_sensor`` asks: did a source change since
its raw questions last landed? Web sources are probed (robots.txt and sitemaps, no pages);
file sources compare their files' sizes and hashes with the ones the last landing recorded
(``pipelines.store.memo``)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from pipelines.ingest.crawl import CrawlConfig, RawStore, RawStoreError
from pipelines.ingest.crawl.probe import probe_site
from pipelines.ingest.spec import parse_source_spec
from pipelines.ingest.stage import ingest_fingerprint_args, ingest_stage_name, raw_store_dir, web_endpoint
from pipelines.store.memo import check_stage

@dataclass(frozen=True)
class SourceChange:
    """Whether one source changed since the raw questions last landed from it.

    ``changed`` is None when it cannot be told without fetching pages (a site without a
    sitemap, an unreachable site); ``token`` names the state seen (equal tokens, equal state).
    """

    source: str
    kind: str
    changed: bool | None
    token: str
    reasons: tuple[str, ...] = ()
    detail: dict | None = None


@dataclass(frozen=True)
class ChangeReport:
    sources: tuple[SourceChange, ...]

    @property
    def changed(self) -> list[SourceChange]:
        return [s for s in self.sources if s.changed]

    @property
    def digest(self) -> str:
        """Digest of every source's token: the identity of the state seen."""
        hasher = hashlib.sha256()
        for s in sorted(self.sources, key=lambda s: s.source):
            hasher.update(f"{s.source}\t{s.token}\n".encode())
        return hasher.hexdigest()

    def summary(self) -> str:
        parts = []
        for s in self.sources:
            state = "changed" if s.changed else ("unknown" if s.changed is None else "unchanged")
            parts.append(f"{s.source}: {state}" + (f" ({'; '.join(s.reasons[:3])})" if s.reasons else ""))
        return ", ".join(parts) if parts else "no sources"


def detect_source_changes(settings, *, include_demo: bool = True) -> ChangeReport:
    """Look at every configured source without downloading page bodies.

    - web sources (``http://...``, and ``demo`` unless ``include_demo`` is False): robots.txt
      and the sitemaps with conditional GETs, compared with the raw store (see
      ``pipelines/crawl/probe.py``); ``demo`` starts the bundled site at the configured
      revision for the duration, as the build does.
    - file sources: the fingerprint the ingest stage would compute (sizes and mtimes
      of its files; files whose size or mtime changed are hashed and compared) against
      the one recorded when the source last landed. A ``python:`` source cannot be
      watched (``changed`` None): the build imports it every time.
    """

    home = settings.data_home
    found = []
    for text in settings.sources:
        spec = parse_source_spec(text)
        if spec.is_web:
            if spec.kind == "demo" and not include_demo:
                found.append(SourceChange(spec.text, spec.kind, None, "demo-not-probed", ("demo sources are not probed",)))
                continue
            found.append(_web_change(spec, settings))
        elif spec.kind == "python":  # what its function reads is unknown: left to the schedule
            found.append(SourceChange(spec.text, spec.kind, None, "python-not-watched", ("a python: source cannot be watched",)))
        else:
            args = ingest_fingerprint_args(spec, home)
            args.pop("outputs")  # check_stage compares the recorded outputs itself
            check = check_stage(home, ingest_stage_name(spec), **args)
            changed = not check.up_to_date
            found.append(SourceChange(
                spec.text, spec.kind, changed, check.key, (check.reason,) if changed else (),
                {"files": len(check.inputs)},
            ))
    return ChangeReport(tuple(found))


def _web_change(spec, settings) -> SourceChange:

    home = settings.data_home
    store_dir = raw_store_dir(home, spec)
    try:
        RawStore(store_dir).close()
    except RawStoreError:
        return SourceChange(spec.text, spec.kind, True, "never crawled", ("never crawled",))
    with web_endpoint(spec, settings) as (base_url, canonical_base):
        config = CrawlConfig(base_url=base_url, canonical_base=canonical_base, timeout=settings.crawl_timeout)
        probe = probe_site(config, store_dir)
    reasons = list(probe.reasons)
    changed = probe.changed
    # a crawl whose pages were not parsed into raw questions yet is a change too
    args = ingest_fingerprint_args(spec, home)
    args.pop("outputs")
    landed = check_stage(home, ingest_stage_name(spec), **args)
    if not landed.up_to_date:
        changed = True
        reasons.append(f"raw questions not up to date with the raw store ({landed.reason})")
    token = (probe.token or "unknown") + " " + landed.key
    return SourceChange(spec.text, spec.kind, changed, token, tuple(reasons), probe.as_dict())
