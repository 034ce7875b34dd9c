"""The crawl loop: worker threads fetch, the calling thread owns the SQLite index.

Each worker fetches one URL end to end: robots check, rate-limit slot, request with
retries (exponential backoff with jitter; Retry-After for 429/503), manual redirects
(hop limit, loop detection, allow-list, robots per hop), size and time limits, the body
into the content-addressed store, and link extraction. The calling thread records the
outcomes and the discovered links in the frontier, a batch per transaction.
"""

from __future__ import annotations

import hashlib
import json
import random
import sqlite3
import threading
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

import requests
import urllib3.exceptions
from requests.adapters import HTTPAdapter

from pipelines.http import (
    RETRY_STATUSES,
    BodyTooLarge,
    ResponseDeadline,
    parse_retry_after,
    read_body,
    retryable_status,
)
from pipelines.ingest.crawl.config import CrawlConfig
from pipelines.ingest.crawl.frontier import FetchResult, Frontier, Task, recorded_sitemap
from pipelines.ingest.crawl.links import UrlMapper, extract_links, maybe_gunzip, normalize_url, parse_sitemap
from pipelines.ingest.crawl.ratelimit import HostRateLimiter
from pipelines.ingest.crawl.raw_store import RawStore, RawStoreError
from pipelines.ingest.crawl.robots import MAX_ROBOTS_BYTES, RobotsCache, RobotsRules
from pipelines.progress import ForwardProgress

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
GONE_STATUSES = frozenset({404, 410})
_DRAIN_LIMIT = 64 * 1024


@dataclass
class CrawlReport:
    """Counts for one ``crawl()`` call (one pass, or the part of it this call did)."""

    pass_number: int = 0
    resumed: bool = False
    complete: bool = False  # the pass finished (nothing left in the frontier)
    requested: int = 0  # HTTP requests sent, retries, redirect hops and robots.txt included
    downloaded: int = 0  # URLs whose body came over the wire
    not_modified: int = 0  # URLs answered 304: the stored body was kept
    stored: int = 0  # URLs that ended stored in this call
    failed: dict[str, int] = field(default_factory=dict)  # reason -> URLs
    skipped_robots: int = 0
    gone: int = 0
    unchanged: int = 0  # known URLs not requested in this pass (revalidate='lastmod')
    discovered: int = 0  # URLs first seen in this call
    over_budget: int = 0  # links not followed: the source already has max_urls URLs (its crawl budget)
    bytes_downloaded: int = 0
    elapsed: float = 0.0

    @property
    def finished(self) -> int:
        return self.stored + self.failed_total + self.skipped_robots + self.gone

    @property
    def failed_total(self) -> int:
        return sum(self.failed.values())

    @property
    def pages_per_second(self) -> float:
        """URLs finished per second of wall time."""
        return self.finished / self.elapsed if self.elapsed > 0 else 0.0

    def as_dict(self) -> dict:
        """Plain JSON-able counts (for Dagster metadata and logs)."""
        out = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out["failed"] = dict(sorted(self.failed.items()))
        out.update(finished=self.finished, failed_total=self.failed_total, pages_per_second=round(self.pages_per_second, 1))
        out["elapsed"] = round(self.elapsed, 3)
        return out

    def summary(self) -> str:
        failed = ", ".join(f"{n} {reason}" for reason, n in sorted(self.failed.items(), key=lambda kv: -kv[1])[:5])
        return (
            f"pass {self.pass_number}{' (resumed)' if self.resumed else ''}: {self.finished} URLs in {self.elapsed:.1f} s "
            f"({self.pages_per_second:.0f}/s): {self.stored} stored ({self.downloaded} downloaded, "
            f"{self.not_modified} not modified), {self.failed_total} failed{f' [{failed}]' if failed else ''}, "
            f"{self.skipped_robots} skipped by robots.txt, {self.gone} gone"
            f"{f', {self.unchanged} unchanged by sitemap' if self.unchanged else ''}; {self.requested} requests"
            f"{'' if self.complete else '; pass not finished'}"
        )

    def _add(self, result: FetchResult) -> None:
        self.requested += result.requests
        if result.state == "stored":
            self.stored += 1
            self.downloaded += result.downloaded
            self.not_modified += result.not_modified
            if result.downloaded:
                self.bytes_downloaded += result.size or 0
        elif result.state == "failed":
            self.failed[result.reason or "unknown"] = self.failed.get(result.reason or "unknown", 0) + 1
        elif result.state == "skipped_robots":
            self.skipped_robots += 1
        elif result.state == "gone":
            self.gone += 1


def canonical_text_digest(body: bytes, config: CrawlConfig) -> str:
    """sha256 of ``body`` with the request base written as the canonical base, so a site
    served on another port is not taken for a changed one."""
    base, canonical = config.base_url.encode(), config.canonical_base.encode()
    return hashlib.sha256(body.replace(base, canonical).replace(base.rstrip(b"/"), canonical.rstrip(b"/"))).hexdigest()


def sitemap_entries_digest(pages: list[tuple[str, str | None]]) -> str:
    """sha256 of a sitemap's (canonical URL, lastmod) entries, in a stable order."""
    ordered = sorted(pages, key=lambda p: (p[0], p[1] or ""))
    return hashlib.sha256("".join(f"{u}\t{m or ''}\n" for u, m in ordered).encode()).hexdigest()


def _size_text(limit: int) -> str:
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if limit >= size and limit % size == 0:
            return f"{limit // size} {unit}"
    return f"{limit} bytes"


class _Transient(Exception):
    """An attempt that may succeed if retried."""

    def __init__(self, label: str, status: int | None = None, retry_after: float | None = None):
        super().__init__(label)
        self.label = label
        self.status = status
        self.retry_after = retry_after


class _Permanent(Exception):
    def __init__(self, reason: str, status: int | None = None):
        super().__init__(reason)
        self.reason = reason
        self.status = status


@dataclass
class _Response:
    status: int
    headers: requests.structures.CaseInsensitiveDict
    body: bytes | None
    url: str  # request URL


class _Fetcher:
    def __init__(self, config: CrawlConfig, store: RawStore, mapper: UrlMapper, limiter: HostRateLimiter):
        self.config = config
        self.store = store
        self.mapper = mapper
        self.limiter = limiter
        self.robots = RobotsCache(self.fetch_robots)
        self.policy = config.retry_policy
        self._local = threading.local()
        self._random = random.Random()
        self._random_lock = threading.Lock()
        self._extra_requests = 0  # robots.txt fetches
        self.robots_validators: dict[str, dict] = {}  # "robots <canonical URL>" -> sha256, etag, last_modified
        self.robots_changed: dict[str, dict] = {}
        self.robots_rules_changed = False  # a robots.txt whose text (request base mapped to canonical) changed
        self._extra_lock = threading.Lock()

    def canonical_digest(self, body: bytes) -> str:
        return canonical_text_digest(body, self.config)

    # HTTP ---------------------------------------------------------------------------------
    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = requests.Session()
            session.trust_env = False  # no proxy/netrc lookups per request; crawls go direct
            adapter = HTTPAdapter(pool_connections=4, pool_maxsize=4, max_retries=0)
            session.mount("http://", adapter)
            session.mount("https://", adapter)
            session.headers.update({"User-Agent": self.config.user_agent, "Accept": "*/*"})
            self._local.session = session
        return session

    def _attempt(self, url: str, headers: dict[str, str], body_limit: int, truncate: bool) -> _Response:
        host = urlsplit(url).netloc
        self.limiter.acquire(host)
        timeout = self.policy.timeout
        started = time.monotonic()
        try:
            response = self._session().get(url, headers=headers, stream=True, timeout=(timeout, timeout), allow_redirects=False)
        except requests.exceptions.Timeout:
            raise _Transient("timeout") from None
        except (requests.exceptions.ConnectionError, requests.exceptions.ChunkedEncodingError) as exc:
            raise _Transient("connection error") from exc
        except requests.exceptions.RequestException as exc:
            raise _Permanent(f"request error: {type(exc).__name__}") from None
        status = response.status_code
        try:
            if status in REDIRECT_STATUSES or status == 304 or status >= 400 or status < 200:
                body, complete = self._read(response, _DRAIN_LIMIT, True, started)
                body = None
            else:
                declared = response.headers.get("Content-Length", "")
                if declared.isdigit() and int(declared) > body_limit and not truncate:
                    raise _Permanent(f"body exceeds {_size_text(body_limit)}", status)
                body, complete = self._read(response, body_limit, truncate, started)
            if complete:
                response.raw.release_conn()  # back to the pool for keep-alive
            else:
                response.close()  # unread bytes left: the connection cannot be reused
        except (_Permanent, _Transient):
            response.close()
            raise
        except urllib3.exceptions.ReadTimeoutError:
            response.close()
            raise _Transient("timeout") from None
        except urllib3.exceptions.DecodeError:
            response.close()
            raise _Permanent("undecodable Content-Encoding", status) from None
        except (urllib3.exceptions.HTTPError, requests.exceptions.RequestException, OSError):
            response.close()
            raise _Transient("truncated response") from None
        if retryable_status(status):
            raise _Transient(f"HTTP {status}", status, parse_retry_after(response.headers.get("Retry-After")))
        return _Response(status, response.headers, body, url)

    def _read(self, response: requests.Response, limit: int, truncate: bool, started: float) -> tuple[bytes, bool]:
        """(body, read to the end); over ``limit``: the first ``limit`` bytes if ``truncate``,
        else a permanent failure. The deadline is checked continuously (``pipelines.http.read_body``,
        shared with the API clients), so a server that drip-feeds its body (slow-loris) costs the
        deadline, not minutes."""
        try:
            return read_body(response, started + self.config.timeout, limit, truncate, self.policy.timeout)
        except ResponseDeadline:
            raise _Transient("timeout") from None
        except BodyTooLarge:
            raise _Permanent(f"body exceeds {_size_text(limit)}", response.status_code) from None

    def request(self, url: str, headers: dict[str, str], body_limit: int | None = None, truncate: bool = False) -> tuple[_Response, int]:
        """One hop with retries; returns (response, attempts) or raises _Permanent."""
        config, policy = self.config, self.policy
        limit = body_limit or config.max_body_bytes
        attempts, waited = 0, 0.0
        while True:
            attempts += 1
            try:
                return self._attempt(url, headers, limit, truncate), attempts
            except _Permanent as exc:
                exc.attempts = attempts  # type: ignore[attr-defined]
                raise
            except _Transient as exc:
                with self._random_lock:
                    delay = policy.retry_delay(exc.retry_after, attempts, waited, self._random)
                if delay is None:
                    if attempts <= policy.retries and (exc.retry_after or 0.0) > policy.max_retry_after:
                        reason = f"{exc.label} with Retry-After {exc.retry_after:.0f} s (over the {policy.max_retry_after:.0f} s limit)"
                    else:
                        reason = f"{exc.label} after {attempts} attempts"
                    failure = _Permanent(reason, exc.status)
                    failure.attempts = attempts  # type: ignore[attr-defined]
                    raise failure from None
                if exc.retry_after is not None and config.retry_after_pauses_host:
                    self.limiter.pause(urlsplit(url).netloc, delay)
                time.sleep(delay)
                waited += delay

    # robots.txt -------------------------------------------------------------------------
    def fetch_robots(self, robots_url: str) -> RobotsRules:
        """Rules from robots.txt (conditional GET against the copy kept from the last crawl).

        4xx means no rules; 5xx or no answer after retries means disallow everything (RFC 9309).
        """
        key = "robots " + self.mapper.to_canonical(robots_url)
        known = self.robots_validators.get(key, {})
        headers: dict[str, str] = {}
        if known.get("sha256") and self.store.body_path(known["sha256"]).exists():
            if known.get("etag"):
                headers["If-None-Match"] = known["etag"]
            if known.get("last_modified"):
                headers["If-Modified-Since"] = known["last_modified"]
        url = robots_url
        seen = {url}
        for _ in range(5):
            try:
                response, attempts = self.request(url, headers, MAX_ROBOTS_BYTES, truncate=True)
            except _Permanent as exc:
                self._count(getattr(exc, "attempts", 1))
                if exc.status is not None and 400 <= exc.status < 500 and exc.status not in RETRY_STATUSES:
                    return RobotsRules.allow_all()
                return RobotsRules.unreachable(f"robots.txt unreachable: {exc.reason}")
            self._count(attempts)
            if response.status in REDIRECT_STATUSES and response.headers.get("Location"):
                target = normalize_url(requests.compat.urljoin(url, response.headers["Location"]))
                if target is None or target in seen or not self.mapper.host_allowed(target):
                    return RobotsRules.allow_all()
                seen.add(target)
                url = target
                continue
            if response.status == 304 and headers:
                body = self.store.read_body(known["sha256"]) or b""
            elif 400 <= response.status < 500:
                return RobotsRules.allow_all()
            elif response.status >= 300:
                return RobotsRules.unreachable(f"robots.txt unreachable: HTTP {response.status}")
            else:
                body = response.body or b""
                entry = {"sha256": self.store.put_body(body), "etag": response.headers.get("ETag"),
                         "last_modified": response.headers.get("Last-Modified"),
                         "canonical": self.canonical_digest(body)}
                with self._extra_lock:
                    if known.get("canonical") != entry["canonical"]:
                        self.robots_rules_changed = True
                    self.robots_validators[key] = entry
                    self.robots_changed[key] = entry
            return RobotsRules.parse(body.decode("utf-8", "replace"), self.config.robots_agent)
        return RobotsRules.allow_all()

    def _count(self, n: int) -> None:
        with self._extra_lock:
            self._extra_requests += n

    def take_robots_changes(self) -> dict[str, dict]:
        with self._extra_lock:
            changed, self.robots_changed = self.robots_changed, {}
        return changed

    def take_extra_requests(self) -> int:
        with self._extra_lock:
            n, self._extra_requests = self._extra_requests, 0
        return n

    # one URL ------------------------------------------------------------------------------
    def run(self, task: Task) -> FetchResult:
        try:
            return self._run(task)
        except Exception as exc:  # a crawler bug must not lose the URL: record it as a failure
            return FetchResult(task, "failed", reason=f"crawler error: {type(exc).__name__}: {exc}"[:300])

    def _robots_verdict(self, url: str) -> RobotsRules | None:
        if not self.config.polite:
            return None
        rules = self.robots.rules_for(url)
        if rules.crawl_delay and not rules.crawl_delay_applied:
            rules.crawl_delay_applied = True
            self.limiter.set_rate(urlsplit(url).netloc, 1.0 / rules.crawl_delay)
        return rules

    def _run(self, task: Task) -> FetchResult:
        config = self.config
        headers: dict[str, str] = {}
        if task.sha256 and task.state in ("stored", "failed"):
            if task.etag:
                headers["If-None-Match"] = task.etag
            if task.last_modified:
                headers["If-Modified-Since"] = task.last_modified
        current = self.mapper.to_request(task.url)
        visited = {current}
        attempts = requests_made = 0
        for hop in range(config.max_redirects + 1):
            rules = self._robots_verdict(current)
            if rules is not None and not rules.allowed(current):
                if rules.disallow_all_reason:
                    return FetchResult(task, "failed", reason=rules.disallow_all_reason, attempts=attempts, requests=requests_made)
                if hop == 0:
                    return FetchResult(task, "skipped_robots", reason="disallowed by robots.txt")
                return FetchResult(
                    task, "failed", reason=f"redirect to a URL disallowed by robots.txt: {self.mapper.to_canonical(current)}",
                    attempts=attempts, requests=requests_made,
                )
            try:
                response, hop_attempts = self.request(current, headers)
            except _Permanent as exc:
                hop_attempts = getattr(exc, "attempts", 1)
                attempts += hop_attempts
                requests_made += hop_attempts
                state = "failed"
                if exc.status in GONE_STATUSES and task.sha256:
                    state = "gone"
                return FetchResult(task, state, status=exc.status, reason=exc.reason, attempts=attempts, requests=requests_made,
                                   final_url=self._final(task, current))
            attempts += hop_attempts
            requests_made += hop_attempts
            status = response.status
            if status in REDIRECT_STATUSES:
                location = response.headers.get("Location")
                if not location:
                    return FetchResult(task, "failed", status=status, reason=f"HTTP {status} without Location",
                                       attempts=attempts, requests=requests_made)
                target = normalize_url(requests.compat.urljoin(current, location))
                if target is None:
                    return FetchResult(task, "failed", status=status, reason=f"redirect to an unsupported URL: {location[:200]}",
                                       attempts=attempts, requests=requests_made)
                target = self.mapper.to_request(target)
                if not self.mapper.host_allowed(target):
                    return FetchResult(task, "failed", status=status,
                                       reason=f"redirect to host not on allow-list: {urlsplit(target).hostname}",
                                       attempts=attempts, requests=requests_made)
                if target in visited:
                    return FetchResult(task, "failed", status=status, reason="redirect loop", attempts=attempts,
                                       requests=requests_made)
                visited.add(target)
                current = target
                continue
            if status in GONE_STATUSES:
                return FetchResult(task, "gone" if task.sha256 else "failed", status=status, reason=f"HTTP {status}",
                                   attempts=attempts, requests=requests_made, final_url=self._final(task, current))
            if status == 304:
                if not task.sha256:
                    return FetchResult(task, "failed", status=304, reason="HTTP 304 to an unconditional request",
                                       attempts=attempts, requests=requests_made)
                return self._not_modified(task, response, current, attempts, requests_made)
            if status >= 300:
                return FetchResult(task, "failed", status=status, reason=f"HTTP {status}", attempts=attempts,
                                   requests=requests_made, final_url=self._final(task, current))
            return self._stored(task, response, current, attempts, requests_made)
        return FetchResult(task, "failed", reason=f"more than {config.max_redirects} redirects", attempts=attempts,
                           requests=requests_made)

    def _final(self, task: Task, current: str) -> str | None:
        final = self.mapper.to_canonical(current)
        return None if final == task.url else final

    def _stored(self, task: Task, response: _Response, current: str, attempts: int, requests_made: int) -> FetchResult:
        body = response.body or b""
        content_type = (response.headers.get("Content-Type") or "").strip() or _sniff(body)
        sha = self.store.put_body(body)
        result = FetchResult(
            task, "stored", status=response.status, content_type=content_type, sha256=sha, size=len(body),
            etag=response.headers.get("ETag"), last_modified=response.headers.get("Last-Modified"),
            final_url=self._final(task, current), attempts=attempts, requests=requests_made, downloaded=True,
        )
        self._discover(result, body, content_type, current)
        return result

    def _not_modified(self, task: Task, response: _Response, current: str, attempts: int, requests_made: int) -> FetchResult:
        result = FetchResult(
            task, "stored", status=304, content_type=task.content_type, sha256=task.sha256,
            etag=response.headers.get("ETag") or task.etag,
            last_modified=response.headers.get("Last-Modified") or task.last_modified,
            final_url=self._final(task, current), attempts=attempts, requests=requests_made, not_modified=True,
        )
        body = self.store.read_body(task.sha256) if task.sha256 else None
        if body is None:  # the body file vanished: fetch it again unconditionally
            retry = replace(task, sha256=None, etag=None, last_modified=None, state="pending")
            again = self._run(retry)
            again.task = task
            again.requests += requests_made
            return again
        result.size = len(body)
        self._discover(result, body, task.content_type or "", current)
        return result

    def _discover(self, result: FetchResult, body: bytes, content_type: str, page_url: str) -> None:
        media = content_type.split(";", 1)[0].strip().lower()
        accept = self.mapper.accept
        if media in ("text/html", "application/xhtml+xml"):
            links = []
            for raw in extract_links(body, page_url, self.config.follow):
                url = accept(raw, page_url)
                if url is not None:
                    links.append(url)
            result.links = links
        elif "xml" in media or page_url.endswith((".xml", ".xml.gz")) or media in ("application/gzip", "application/x-gzip"):
            data = maybe_gunzip(body, self.config.max_body_bytes)
            sitemap = parse_sitemap(data) if data is not None else None
            if sitemap is not None:
                result.is_sitemap = True
                pages = []
                for loc, lastmod in sitemap.pages + sitemap.sitemaps:
                    url = accept(loc, page_url)
                    if url is not None:
                        pages.append((url, lastmod))
                result.sitemap_pages = pages
                result.sitemap_digest = sitemap_entries_digest(pages)
                result.child_sitemaps = [u for u in (accept(loc, page_url) for loc, _ in sitemap.sitemaps) if u is not None]


def _sniff(body: bytes) -> str:
    head = body[:512].lstrip().lower()
    if head.startswith((b"<!doctype html", b"<html")):
        return "text/html"
    if head.startswith(b"<?xml"):
        return "application/xml"
    return "application/octet-stream"


class _Progress:
    """The crawl's progress bar: the share of known URLs finished, which only moves forward.

    Links found on the way add URLs (the total grows from a few thousand to over ten thousand
    on the demo site), so a bar over URL counts would move backwards; this one
    (``pipelines.progress.ForwardProgress``) shows the highest share reached so far (whole
    percents, 99% at most until the crawl is complete), the URL counts beside it, and 100% when
    the crawl is complete.
    """

    def __init__(self, config: CrawlConfig, report: CrawlReport, frontier: Frontier):
        self.callback = config.progress if callable(config.progress) else None
        self.interval = config.progress_interval
        self.report = report
        self.frontier = frontier
        self.forward = ForwardProgress("crawl", bar=config.progress is True)
        self._last = 0.0

    @property
    def bar(self):
        return self.forward.bar

    def update(self, finished_now: int, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < self.interval:
            return
        self._last = now
        if self.bar is not None:
            remaining = self.frontier.remaining()
            finished = self.report.finished
            self.forward.advance(
                finished / (finished + remaining) if finished + remaining else 1.0,
                f"urls={finished}/{finished + remaining}, stored={self.report.stored}, failed={self.report.failed_total}",
            )
            self.bar.refresh()
        if self.callback is not None:
            self.callback(self.report)

    def close(self, complete: bool = False) -> None:
        self.forward.close(complete)


def crawl(config: CrawlConfig, store_dir: Path | str) -> CrawlReport:
    """Crawl ``config.base_url`` into the raw store at ``store_dir``.

    Resumes an unfinished pass, or starts a new pass that revisits every known URL with
    conditional GET and follows links to new ones. Returns this call's counts.
    """
    started = time.monotonic()
    store = RawStore(store_dir, create=True)
    try:
        with store.exclusive():
            return _crawl(config, store, started)
    except sqlite3.Error as exc:  # a full disk, an I/O error: the index named, with the cause
        raise RawStoreError(f"raw store index {store.index_path}: {exc}"
                            + ("; the disk holding it is full" if "full" in str(exc).lower() else "")) from exc
    finally:
        store.close()


def _crawl(config: CrawlConfig, store: RawStore, started: float) -> CrawlReport:
    mapper = UrlMapper(config.base_url, config.canonical_base, config.allowed_hosts)
    limiter = HostRateLimiter(config.rate_per_host, config.burst, enabled=config.polite)
    fetcher = _Fetcher(config, store, mapper, limiter)
    fetcher.robots_validators = {
        key: json.loads(value) for key, value in store.conn.execute("SELECT key, value FROM meta WHERE key LIKE 'robots %'")
    }
    frontier = Frontier(store)
    frontier.max_urls = config.max_urls
    report = CrawlReport()
    pool: ThreadPoolExecutor | None = None
    progress: _Progress | None = None
    try:
        _, complete = store.pass_info()
        seeds, sitemap_seeds = _seeds(config, mapper, fetcher) if complete else ([], [])
        robots_changed = fetcher.robots_rules_changed
        known_at_start = store.conn.execute("SELECT count(*) FROM urls").fetchone()[0]
        frontier.begin(config.canonical_base, seeds)
        report.pass_number, report.resumed = frontier.pass_number, frontier.resumed
        pool = ThreadPoolExecutor(max_workers=config.concurrency, thread_name_prefix="crawl")
        if config.revalidate == "lastmod" and not frontier.resumed:
            sitemaps_read, sitemaps_changed = _sitemaps_first(fetcher, frontier, report, pool, sitemap_seeds)
            if sitemaps_read and not robots_changed:
                report.unchanged = frontier.mark_unchanged(sitemaps_changed)
            _save_robots(fetcher, frontier)
            report.requested += fetcher.take_extra_requests()
            frontier.commit()
        progress = _Progress(config, report, frontier)
        backlog: deque[Task] = deque()
        in_flight: set[Future] = set()
        submitted = 0
        limit = config.max_pages
        window = config.concurrency * 2
        while True:
            while len(in_flight) < window and (limit is None or submitted < limit):
                if not backlog:
                    backlog.extend(frontier.next_batch(512))
                    if not backlog:
                        break
                in_flight.add(pool.submit(fetcher.run, backlog.popleft()))
                submitted += 1
            if not in_flight:
                break
            done, in_flight = wait(in_flight, timeout=config.progress_interval, return_when=FIRST_COMPLETED)
            for future in done:
                result = future.result()
                frontier.record(result)
                report._add(result)
            _save_robots(fetcher, frontier)
            report.requested += fetcher.take_extra_requests()
            frontier.maybe_commit()
            report.elapsed = time.monotonic() - started
            progress.update(len(done))
        _save_robots(fetcher, frontier)
        frontier.commit()
        report.complete = frontier.remaining(exact=True) == 0
        if report.complete:
            frontier.finish_pass()
        report.discovered = frontier.known_count() - known_at_start
        report.over_budget = frontier.over_budget
        report.requested += fetcher.take_extra_requests()
        report.elapsed = time.monotonic() - started
        progress.update(0, force=True)
        if report.complete:
            progress.close(complete=True)
            progress = None
        return report
    except BaseException:
        # keep every finished result (they are valid); unfinished URLs are redone on resume
        try:
            frontier.commit()
        except Exception:
            try:
                frontier.rollback()
            except Exception:
                pass  # the first error is the one to report
        raise
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        if progress is not None:
            progress.close()


def _save_robots(fetcher: _Fetcher, frontier: Frontier) -> None:
    for key, entry in fetcher.take_robots_changes().items():
        frontier.set_meta(key, json.dumps(entry, sort_keys=True))


def _sitemaps_first(
    fetcher: _Fetcher, frontier: Frontier, report: CrawlReport, pool: ThreadPoolExecutor, roots: list[str]
) -> tuple[int, bool]:
    """Fetch the sitemaps (and the sitemaps of sitemap indexes) before anything else, so
    the pass knows every listed page's lastmod. Returns (sitemaps read, whether any of
    them changed: a body came over the wire or a sitemap failed or disappeared)."""
    read, changed = 0, False
    seen: set[str] = set()
    wanted = list(roots)
    while wanted:
        batch = [u for u in dict.fromkeys(wanted) if u not in seen]
        seen.update(batch)
        wanted = []
        tasks = frontier.tasks_for(batch)
        for result in pool.map(fetcher.run, tasks):
            before = recorded_sitemap(frontier.store, result.task.url)
            frontier.record(result)
            report._add(result)
            if result.state == "stored" and result.is_sitemap:
                read += 1
                changed = changed or before is None or before.get("digest") != result.sitemap_digest
                wanted.extend(result.child_sitemaps)
            elif result.task.sha256 is not None:
                changed = True  # a sitemap that used to be there is not one any more
        frontier.commit()
    return read, changed


def _seeds(config: CrawlConfig, mapper: UrlMapper, fetcher: _Fetcher) -> tuple[list[str], list[str]]:
    """(every seed, the sitemap seeds): base URL, robots.txt ``Sitemap:`` lines,
    /sitemap.xml and any extra seeds (canonical)."""
    base = config.base_url
    rules = fetcher.robots.rules_for(base)
    seeds = [config.canonical_base]
    sitemaps = []
    for raw in [*rules.sitemaps, "/sitemap.xml"]:
        url = mapper.accept(raw, base)
        if url is not None:
            sitemaps.append(url)
    for raw in config.extra_seeds:
        url = mapper.accept(raw, base)
        if url is not None:
            seeds.append(url)
    return list(dict.fromkeys([*seeds[:1], *sitemaps, *seeds[1:]])), list(dict.fromkeys(sitemaps))
