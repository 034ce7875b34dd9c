"""Has a crawled site changed? Answered from robots.txt and the sitemaps alone.

``probe_site(config, store_dir)`` requests robots.txt and every sitemap reachable from it
(and ``/sitemap.xml``), each with a conditional GET against the validators the raw store
kept, and compares what they list — the (canonical URL, lastmod) entries of each sitemap
— with what the last crawl recorded (``frontier.recorded_sitemap``). No page body is
requested and nothing is written to the store. A sitemap answering 304 is unchanged by
definition; one answering 200 is parsed and its entries' digest compared, so a site
served on another port (the bundled demo) is not taken for a changed one.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import requests

from pipelines.ingest.crawl.config import CrawlConfig
from pipelines.http import BodyTooLarge, RetryPolicy, read_body
from pipelines.ingest.crawl.engine import REDIRECT_STATUSES, canonical_text_digest, sitemap_entries_digest
from pipelines.ingest.crawl.frontier import recorded_sitemap
from pipelines.ingest.crawl.links import UrlMapper, maybe_gunzip, normalize_url, parse_sitemap
from pipelines.ingest.crawl.raw_store import RawStore, RawStoreError
from pipelines.ingest.crawl.robots import MAX_ROBOTS_BYTES, RobotsRules

MAX_SITEMAPS = 10_000


def probe_policy(config: CrawlConfig) -> RetryPolicy:
    """The crawl's retry policy with short waits: a probe answers a sensor, which must not stall."""
    return replace(config.retry_policy, backoff=0.4, backoff_cap=5.0, max_retry_after=5.0)


@dataclass
class SiteProbe:
    """What a probe found. ``changed`` is None when it cannot tell (no sitemap)."""

    changed: bool | None
    reasons: list[str] = field(default_factory=list)
    token: str = ""  # digest of the live state seen (robots text and every sitemap's entries)
    requests: int = 0
    bytes_downloaded: int = 0
    sitemaps: int = 0
    not_modified: int = 0

    def as_dict(self) -> dict:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def _get(session: requests.Session, url: str, headers: dict, limit: int, timeout: float, mapper: UrlMapper,
         probe: SiteProbe) -> tuple[int, bytes | None]:
    """GET with at most 5 redirects on allowed hosts (the session retries transient answers);
    (status, body or None)."""
    for _ in range(6):
        probe.requests += 1
        started = time.monotonic()
        response = session.get(url, headers=headers, timeout=(timeout, timeout), allow_redirects=False, stream=True)
        try:
            retries = getattr(response.raw, "retries", None)
            probe.requests += len(retries.history) if retries is not None else 0
            status = response.status_code
            if status in REDIRECT_STATUSES and response.headers.get("Location"):
                target = normalize_url(urljoin(url, response.headers["Location"]))
                if target is None or not mapper.host_allowed(target):
                    return status, None
                url = target
                continue
            if status != 200:
                return status, None
            try:  # the whole body within the deadline, however slowly the server sends it
                body, _ = read_body(response, started + timeout, limit, receive_timeout=timeout)
            except BodyTooLarge:
                return 413, None
            probe.bytes_downloaded += len(body)
            return status, body
        finally:
            response.close()
    return 310, None


def _validators(etag: str | None, last_modified: str | None) -> dict:
    headers = {}
    if etag:
        headers["If-None-Match"] = etag
    if last_modified:
        headers["If-Modified-Since"] = last_modified
    return headers


def probe_site(config: CrawlConfig, store_dir: Path | str) -> SiteProbe:
    """Compare the live robots.txt and sitemaps of ``config.base_url`` with the raw store."""
    try:
        store = RawStore(store_dir)
    except RawStoreError:
        return SiteProbe(True, ["never crawled"])
    try:
        return _probe(config, store)
    finally:
        store.close()


def _probe(config: CrawlConfig, store: RawStore) -> SiteProbe:
    probe = SiteProbe(changed=False)
    number, complete = store.pass_info()
    if not complete:
        probe.reasons.append(f"crawl pass {number} did not finish")
    mapper = UrlMapper(config.base_url, config.canonical_base, config.allowed_hosts)
    session = probe_policy(config).session({"User-Agent": config.user_agent, "Accept": "*/*"})
    token = hashlib.sha256()
    try:
        # robots.txt: its text, with the request base written as the canonical one
        parts = urlsplit(config.base_url)
        robots_url = f"{parts.scheme}://{parts.netloc}/robots.txt"
        known = json.loads(store.meta("robots " + mapper.to_canonical(robots_url)) or "{}")
        known_body = store.read_body(known["sha256"]) if known.get("sha256") else None
        headers = _validators(known.get("etag"), known.get("last_modified")) if known_body is not None else {}
        status, body = _get(session, robots_url, headers, MAX_ROBOTS_BYTES, config.timeout, mapper, probe)
        if status == 304 and known_body is not None:
            body, robots_digest = known_body, known.get("canonical")
        elif status == 200 and body is not None:
            robots_digest = canonical_text_digest(body, config)
        else:
            body, robots_digest = b"", f"status {status}"
        if robots_digest != known.get("canonical"):
            probe.reasons.append("robots.txt changed")
        token.update(f"robots {robots_digest}\n".encode())
        rules = RobotsRules.parse(body.decode("utf-8", "replace"), config.robots_agent)
        roots = [mapper.accept(raw, config.base_url) for raw in [*rules.sitemaps, "/sitemap.xml"]]
        _walk_sitemaps(config, store, mapper, session, [u for u in dict.fromkeys(roots) if u], probe, token)
    except requests.RequestException as exc:
        return SiteProbe(None, [f"site unreachable: {type(exc).__name__}"], requests=probe.requests)
    finally:
        session.close()
    probe.token = token.hexdigest()
    if probe.sitemaps == 0:
        probe.changed = None
        probe.reasons.append("no sitemap: changes cannot be seen without fetching pages")
    else:
        probe.changed = bool(probe.reasons)
    return probe


def _walk_sitemaps(config, store, mapper, session, roots, probe: SiteProbe, token) -> None:
    seen: set[str] = set()
    queue = list(roots)
    while queue and len(seen) < MAX_SITEMAPS:
        url = queue.pop(0)
        if url in seen:
            continue
        seen.add(url)
        row = store.record(url)
        recorded = recorded_sitemap(store, url)
        have_body = bool(row and row.sha256 and store.body_path(row.sha256).exists())
        headers = _validators(row.etag, row.last_modified) if (have_body and recorded and row.is_sitemap) else {}
        status, body = _get(session, mapper.to_request(url), headers, config.max_body_bytes, config.timeout, mapper, probe)
        if status == 304 and headers:
            probe.sitemaps += 1
            probe.not_modified += 1
            token.update(f"sitemap {url} {recorded.get('digest')}\n".encode())
            queue.extend(recorded.get("children") or [])
            continue
        data = maybe_gunzip(body, config.max_body_bytes) if body is not None else None
        sitemap = parse_sitemap(data) if data is not None else None
        if sitemap is None:
            if recorded is not None:
                probe.reasons.append(f"sitemap {url} is gone (HTTP {status})")
            token.update(f"sitemap {url} missing {status}\n".encode())
            continue
        probe.sitemaps += 1
        request_url = mapper.to_request(url)
        pages = [(u, m) for u, m in ((mapper.accept(loc, request_url), m) for loc, m in sitemap.pages + sitemap.sitemaps) if u]
        digest = sitemap_entries_digest(pages)
        if recorded is None:
            probe.reasons.append(f"new sitemap {url}")
        elif recorded.get("digest") != digest:
            probe.reasons.append(f"sitemap {url} lists other pages or lastmods")
        token.update(f"sitemap {url} {digest}\n".encode())
        queue.extend(u for u in (mapper.accept(loc, request_url) for loc, _ in sitemap.sitemaps) if u)
