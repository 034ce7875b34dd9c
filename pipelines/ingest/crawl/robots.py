"""robots.txt per RFC 9309 (groups by user agent, Allow/Disallow with ``*`` and ``$``, longest
match wins, Allow on ties, ``Crawl-delay`` and ``Sitemap`` lines), read by Scrapy's ``protego``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Callable
from urllib.parse import urlsplit

from protego import Protego

MAX_ROBOTS_BYTES = 500 * 1024  # RFC 9309: parse at least the first 500 KiB


@dataclass
class RobotsRules:
    parser: Protego | None = None  # None: no rules, everything allowed
    agent: str = ""
    crawl_delay: float | None = None
    sitemaps: list[str] = field(default_factory=list)
    disallow_all_reason: str | None = None  # set when robots.txt was unreachable
    crawl_delay_applied: bool = False

    @classmethod
    def allow_all(cls) -> "RobotsRules":
        return cls()

    @classmethod
    def unreachable(cls, reason: str) -> "RobotsRules":
        return cls(disallow_all_reason=reason)

    @classmethod
    def parse(cls, text: str, agent: str) -> "RobotsRules":
        parser = Protego.parse(text)
        delay = parser.crawl_delay(agent)
        return cls(parser, agent, float(delay) if delay else None, list(parser.sitemaps))

    def allowed(self, url: str) -> bool:
        if self.disallow_all_reason is not None:
            return False
        if self.parser is None or (urlsplit(url).path or "/") == "/robots.txt":
            return True
        return self.parser.can_fetch(url, self.agent)


RobotsFetcher = Callable[[str], "RobotsRules"]


class RobotsCache:
    """Rules per ``scheme://host:port``, fetched once per crawl on first use (thread-safe)."""

    def __init__(self, fetch: RobotsFetcher):
        self._fetch = fetch
        self._rules: dict[str, RobotsRules] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def rules_for(self, url: str) -> RobotsRules:
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        rules = self._rules.get(origin)
        if rules is not None:
            return rules
        with self._guard:
            lock = self._locks.setdefault(origin, threading.Lock())
        with lock:
            rules = self._rules.get(origin)
            if rules is None:
                rules = self._fetch(origin + "/robots.txt")
                self._rules[origin] = rules
        return rules

    def allowed(self, url: str) -> bool:
        return self.rules_for(url).allowed(url)
