"""Crawl settings, validated up front so that a bad value fails with one clear line."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Union
from urllib.parse import urlsplit

from pipelines.http import RetryPolicy

DEFAULT_USER_AGENT = "stemforge-crawler/0.1 (+https://github.com/stemforge)"
REVALIDATE_MODES = ("all", "lastmod")


class CrawlConfigError(ValueError):
    """A crawl setting that cannot be used; the message is one line."""


ProgressCallback = Callable[["object"], None]  # receives a CrawlReport snapshot


def _base(url: str, what: str) -> str:
    parts = urlsplit(url or "")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CrawlConfigError(f"{what} {url!r} must be an absolute http(s) URL with a host")
    if parts.query or parts.fragment:
        raise CrawlConfigError(f"{what} {url!r} must not have a query or fragment")
    path = parts.path or "/"
    if not path.endswith("/"):
        path += "/"
    netloc = parts.hostname.lower()
    if parts.port is not None and parts.port != {"http": 80, "https": 443}[parts.scheme]:
        netloc += f":{parts.port}"
    return f"{parts.scheme}://{netloc}{path}"


@dataclass(frozen=True)
class CrawlConfig:
    """What to crawl and how politely.

    ``base_url`` is where requests go; ``canonical_base`` is how URLs under it are recorded
    in the raw store (so a site served on a random loopback port keeps stable keys).
    ``allowed_hosts`` entries are host names (any port) or ``host:port``; by default the
    hosts of ``base_url`` and ``canonical_base``. ``polite=False`` disables robots.txt
    rules and the per-host rate limit (for benchmarks on sites you own); Retry-After is
    still honored.

    ``revalidate`` says what a new pass over a known site requests again:

    - ``all``: every known URL, with a conditional GET.
    - ``lastmod``: the sitemaps first (conditional GET), then only what may have changed:
      pages the sitemaps list with a ``lastmod`` other than the one known when the page
      was last stored, pages new to the sitemaps, pages the sitemaps stopped listing (a
      404/410 makes them ``gone``), URLs that failed or were never fetched. Images are
      immutable content (a new image is a new URL) and are not requested again. Pages no
      sitemap lists (listing pages, pagination) are revalidated only when a sitemap
      changed. A site without a sitemap, or whose robots.txt changed, is revalidated
      whole, as with ``all``.
    """

    base_url: str
    canonical_base: str | None = None
    allowed_hosts: tuple[str, ...] = ()
    rate_per_host: float = 4.0  # requests per second per host
    burst: int = 1  # token-bucket capacity
    concurrency: int = 8
    timeout: float = 15.0  # connect/read timeout and total deadline for one response, seconds
    max_retries: int = 3  # extra attempts after the first, for 5xx, 408, 429, timeouts, connection errors
    backoff_base: float = 0.5
    backoff_cap: float = 30.0
    max_retry_after: float = 300.0  # a longer Retry-After fails the URL instead of stalling the crawl
    retry_after_pauses_host: bool = False  # True: a Retry-After holds back every request to the host, not just that URL
    max_redirects: int = 10
    user_agent: str = DEFAULT_USER_AGENT
    max_body_bytes: int = 5 * 1024 * 1024
    polite: bool = True
    max_pages: int | None = None  # URLs finished in this call; the pass resumes on the next call
    max_urls: int | None = 100_000  # the crawl budget: URLs a source may have; links past it are not followed
    progress: Union[bool, ProgressCallback] = False
    progress_interval: float = 0.5  # seconds between progress callback calls
    extra_seeds: tuple[str, ...] = field(default_factory=tuple)
    revalidate: str = "all"  # all | lastmod
    follow: tuple[str, ...] = ()  # CSS selectors of the links to follow (a site layout's); () = every link

    def __post_init__(self) -> None:
        object.__setattr__(self, "base_url", _base(self.base_url, "base_url"))
        canonical = _base(self.canonical_base, "canonical_base") if self.canonical_base else self.base_url
        object.__setattr__(self, "canonical_base", canonical)
        hosts = tuple(h.strip().lower() for h in self.allowed_hosts if h and h.strip())
        if not hosts:
            hosts = tuple(dict.fromkeys([urlsplit(self.base_url).hostname, urlsplit(canonical).hostname]))
        object.__setattr__(self, "allowed_hosts", hosts)
        object.__setattr__(self, "extra_seeds", tuple(self.extra_seeds))
        object.__setattr__(self, "follow", tuple(self.follow))
        checks = [
            (self.rate_per_host > 0, "rate_per_host must be > 0"),
            (self.burst >= 1, "burst must be >= 1"),
            (self.concurrency >= 1, "concurrency must be >= 1"),
            (self.timeout > 0, "timeout must be > 0"),
            (self.max_retries >= 0, "max_retries must be >= 0"),
            (self.backoff_base >= 0 and self.backoff_cap >= 0, "backoff_base and backoff_cap must be >= 0"),
            (self.max_retry_after >= 0, "max_retry_after must be >= 0"),
            (self.max_redirects >= 0, "max_redirects must be >= 0"),
            (self.max_body_bytes > 0, "max_body_bytes must be > 0"),
            (self.max_pages is None or self.max_pages >= 1, "max_pages must be >= 1 or None"),
            (self.max_urls is None or self.max_urls >= 1, "max_urls must be >= 1 or None"),
            (bool(self.user_agent.strip()), "user_agent must not be empty"),
            (self.revalidate in REVALIDATE_MODES, f"revalidate must be one of {', '.join(REVALIDATE_MODES)}, got {self.revalidate!r}"),
        ]
        for ok, message in checks:
            if not ok:
                raise CrawlConfigError(message)

    @property
    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(retries=self.max_retries, backoff=self.backoff_base, backoff_cap=self.backoff_cap,
                           max_retry_after=self.max_retry_after, timeout=self.timeout,
                           max_total_wait=self.max_retries * max(self.max_retry_after, self.backoff_cap))

    @property
    def robots_agent(self) -> str:
        """The product token matched against robots.txt ``User-agent`` lines."""
        return self.user_agent.split("/")[0].split()[0].lower()
