"""Per-host token buckets, shared by the crawler's worker threads."""

from __future__ import annotations

import threading
import time


class _Bucket:
    __slots__ = ("interval", "capacity", "tokens", "stamp", "paused_until")

    def __init__(self, rate: float, capacity: int, now: float):
        self.interval = 1.0 / rate
        self.capacity = float(capacity)
        self.tokens = float(capacity)
        self.stamp = now
        self.paused_until = 0.0


class HostRateLimiter:
    """``acquire(host)`` blocks until that host may receive one more request.

    Each host has a bucket of ``burst`` tokens refilled at ``rate`` per second. Tokens are
    reserved under the lock (a waiting thread owns its future slot), so N threads asking
    at once are spread ``1/rate`` apart. ``pause(host, seconds)`` holds every request to
    the host back, e.g. for a 429's Retry-After. ``enabled=False`` keeps only pauses.
    """

    def __init__(self, rate: float, burst: int = 1, enabled: bool = True, clock=time.monotonic, sleep=time.sleep):
        self.rate = rate
        self.burst = burst
        self.enabled = enabled
        self._clock = clock
        self._sleep = sleep
        self._buckets: dict[str, _Bucket] = {}
        self._lock = threading.Lock()

    def set_rate(self, host: str, rate: float) -> None:
        """Lower one host's rate (e.g. from robots.txt Crawl-delay)."""
        with self._lock:
            bucket = self._bucket(host, self._clock())
            bucket.interval = max(bucket.interval, 1.0 / rate)

    def _bucket(self, host: str, now: float) -> _Bucket:
        bucket = self._buckets.get(host)
        if bucket is None:
            bucket = self._buckets[host] = _Bucket(self.rate, self.burst, now)
        return bucket

    def pause(self, host: str, seconds: float) -> None:
        with self._lock:
            bucket = self._bucket(host, self._clock())
            bucket.paused_until = max(bucket.paused_until, self._clock() + seconds)

    def acquire(self, host: str) -> float:
        """Wait for a slot; returns the seconds waited."""
        if not self.enabled and not self._buckets:
            return 0.0
        with self._lock:
            now = self._clock()
            bucket = self._bucket(host, now)
            start = max(now, bucket.paused_until)
            if self.enabled:
                bucket.tokens = min(bucket.capacity, bucket.tokens + (start - bucket.stamp) / bucket.interval)
                bucket.stamp = start
                bucket.tokens -= 1.0
                wait_until = start if bucket.tokens >= 0 else start + (-bucket.tokens) * bucket.interval
            else:
                wait_until = start
        delay = wait_until - now
        if delay > 0:
            self._sleep(delay)
        return max(delay, 0.0)
