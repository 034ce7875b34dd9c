"""Deterministic faults of the demo site (``SiteConfig(faults=True)`` / ``--faults``).

Transient faults depend on the URL path (a hash of seed and path) and on how many times
that URL was requested before (``attempt``, 0-based, counted by the server):

- ``RATE_429`` of paths answer 429 with ``Retry-After: 1`` on the first attempt, then succeed;
- ``RATE_5XX`` answer 503 on the first attempt (and half of them 500 on the second), then succeed;
- ``RATE_SLOW`` answer after 0.3-1.5 s on the first attempt (never more than ``MAX_DELAY``).

``/``, ``/robots.txt`` and the sitemaps never fail. Permanent faults are per question
(``permanent(i)``): ``truncated_html`` (the page body is cut at 55 % of its bytes, every
time), ``missing_image`` (one of its images is 404), ``corrupt_image`` (one of its images
is served cut in half) and ``redirect_loop`` (the page redirects to itself through a
``?loop=1`` alias, forever). Each has a rate of ``RATE_PERMANENT`` and, when the site has
such a question at all, at least one instance. The truth file lists them.
"""

from __future__ import annotations

from functools import cached_property

from pipelines.ingest.demo_site.generator import DemoSite
from pipelines.ingest.demo_site.rng import hash64, unit

RATE_429 = 0.04
RATE_5XX = 0.04
RATE_SLOW = 0.015
MAX_DELAY = 1.5
RATE_PERMANENT = 0.005
PERMANENT_KINDS = ("truncated_html", "missing_image", "corrupt_image", "redirect_loop")
NO_FAULT_PATHS = ("/", "/robots.txt", "/sitemap.xml")


class Faults:
    def __init__(self, site: DemoSite):
        self.site = site
        self.enabled = site.config.faults
        self.seed = site.config.seed

    def _suitable(self, kind: str, i: int) -> bool:
        if not self.site.is_present(i):
            return False
        if kind in ("missing_image", "corrupt_image"):
            q = self.site.question(i)
            return bool(q.images)
        return True

    @cached_property
    def _forced(self) -> dict[int, str]:
        forced: dict[int, str] = {}
        n = self.site.num_indices
        for kind in PERMANENT_KINDS:
            start = hash64(self.seed, "forced-fault", kind) % n
            for step in range(min(n, 500)):
                i = (start + step) % n
                if i not in forced and self._rate_fault(i) is None and self._suitable(kind, i):
                    forced[i] = kind
                    break
        return forced

    def _rate_fault(self, i: int) -> str | None:
        u = unit(self.seed, "permanent-fault", i)
        j = int(u / RATE_PERMANENT)
        if j < len(PERMANENT_KINDS):
            kind = PERMANENT_KINDS[j]
            if kind in ("missing_image", "corrupt_image") and not self.site.question(i).images:
                return None
            return kind
        return None

    def permanent(self, i: int) -> str | None:
        """The permanent fault of question ``i``, or None."""
        if not self.enabled:
            return None
        return self._rate_fault(i) or self._forced.get(i)

    def broken_image_slot(self, i: int) -> str:
        """Which image of question ``i`` is missing or corrupt: 'p' (problem) or an option position."""
        q = self.site.question(i)
        return "p" if q.problem_image is not None else str(hash64(self.seed, "slot", i) % q.num_choices)

    def transient(self, path: str, attempt: int):
        """(status, headers, delay seconds) to answer instead of the page, or None."""
        if not self.enabled or path in NO_FAULT_PATHS or path.startswith("/sitemaps/"):
            return None
        u = unit(self.seed, "transient", path)
        if u < RATE_429:
            return (429, {"Retry-After": "1"}, 0.0) if attempt == 0 else None
        u -= RATE_429
        if u < RATE_5XX:
            if attempt == 0:
                return (503, {"Retry-After": "0"}, 0.0)
            if attempt == 1 and hash64(self.seed, "5xx-twice", path) & 1:
                return (500, {}, 0.0)
            return None
        u -= RATE_5XX
        if u < RATE_SLOW and attempt == 0:
            return (None, {}, min(MAX_DELAY, 0.3 + 1.2 * unit(self.seed, "delay", path)))
        return None
