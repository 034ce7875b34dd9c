"""robots.txt per RFC 9309: groups by user agent, Allow/Disallow with ``*`` and ``$``,
longest match wins (Allow on ties), plus ``Crawl-delay`` and ``Sitemap`` lines.

``urllib.robotparser`` matches prefixes only and knows neither wildcards nor the
longest-match rule, so the rules are evaluated here.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Callable
from urllib.parse import urlsplit

MAX_ROBOTS_BYTES = 500 * 1024  # RFC 9309: parse at least the first 500 KiB


@dataclass(frozen=True)
class _Rule:
    allow: bool
    pattern: str

    def matches(self, target: str) -> bool:
        return _wildcard_match(self.pattern, target)


def _wildcard_match(pattern: str, target: str) -> bool:
    """Does ``pattern`` (``*`` = any run, trailing ``$`` = end) match a prefix of ``target``?

    Greedy matching that backtracks only to the last ``*``: O(len(pattern) * len(target))
    at worst, so hostile patterns like ``/*a*a*a*a*b`` cannot stall the crawler.
    """
    anchored = pattern.endswith("$")
    if anchored:
        pattern = pattern[:-1]
    else:
        pattern += "*"
    p = t = 0
    star = -1
    resume = 0
    while t < len(target):
        if p < len(pattern) and pattern[p] == "*":
            star, resume = p, t
            p += 1
        elif p < len(pattern) and pattern[p] == target[t]:
            p += 1
            t += 1
        elif star >= 0:
            p = star + 1
            resume += 1
            t = resume
        else:
            return False
    while p < len(pattern) and pattern[p] == "*":
        p += 1
    return p == len(pattern)


@dataclass
class RobotsRules:
    rules: list[_Rule] = field(default_factory=list)
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
        agent = agent.lower()
        groups: list[tuple[list[str], list[tuple[str, str]]]] = []
        sitemaps: list[str] = []
        current_agents: list[str] | None = None
        current_lines: list[tuple[str, str]] = []
        in_rules = False
        for raw in text.splitlines():
            line = raw.split("#", 1)[0].strip()
            if ":" not in line:
                continue
            key, value = (part.strip() for part in line.split(":", 1))
            key = key.lower()
            if key == "sitemap":
                if value:
                    sitemaps.append(value)
                continue
            if key == "user-agent":
                if current_agents is None or in_rules:
                    current_agents, current_lines = [], []
                    groups.append((current_agents, current_lines))
                    in_rules = False
                current_agents.append(value.lower())
            elif key in ("allow", "disallow", "crawl-delay") and current_agents is not None:
                in_rules = True
                current_lines.append((key, value))
        specific = [lines for agents, lines in groups if any(a != "*" and a and (a == agent or agent.startswith(a)) for a in agents)]
        chosen = specific or [lines for agents, lines in groups if "*" in agents]
        rules: list[_Rule] = []
        delay: float | None = None
        for lines in chosen:
            for key, value in lines:
                if key == "crawl-delay":
                    try:
                        delay = max(delay or 0.0, float(value))
                    except ValueError:
                        pass
                elif value:
                    rules.append(_Rule(key == "allow", value))
        return cls(rules=rules, crawl_delay=delay, sitemaps=sitemaps)

    def allowed(self, url: str) -> bool:
        if self.disallow_all_reason is not None:
            return False
        parts = urlsplit(url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        if target == "/robots.txt":
            return True
        best: _Rule | None = None
        for rule in self.rules:
            if rule.matches(target):
                if best is None or len(rule.pattern) > len(best.pattern) or (
                    len(rule.pattern) == len(best.pattern) and rule.allow
                ):
                    best = rule
        return best is None or best.allow


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
