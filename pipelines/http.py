"""One HTTP retry policy for every client: the crawler, the site probe and the model APIs.

A request is retried on HTTP 408, 425, 429 and 5xx, timeouts and connection errors, at most
``retries`` times. Before each retry it waits what the answer's ``Retry-After`` asks (an
answer asking more than ``max_retry_after`` seconds is given up at once, rather than
stalling), else an exponential backoff ``backoff * 2**(attempt-1)`` capped at
``backoff_cap``, with jitter (half of it random). ``retry_delay`` gives up once the waits of
one request would exceed ``max_total_wait`` (a session's waits are bounded by ``retries``
times the longer of ``backoff_cap`` and ``max_retry_after``). ``timeout`` is the connect and
read timeout of one attempt.

Synchronous clients take ``policy.session()`` (urllib3's ``Retry`` in requests'
``HTTPAdapter``) or call ``policy.retry_delay`` in their own loop when they retry more than
transport failures (the chat client also retries garbage replies; the crawler schedules its
own waits between per-host rate-limit slots).
"""

from __future__ import annotations

import email.utils
import random
import time
from dataclasses import dataclass
from typing import Mapping

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

RETRY_STATUSES = frozenset({408, 425, 429})  # and every 5xx


def retryable_status(status: int) -> bool:
    return status >= 500 or status in RETRY_STATUSES


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP date)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


@dataclass(frozen=True)
class RetryPolicy:
    retries: int = 3
    backoff: float = 0.5
    backoff_cap: float = 30.0
    max_retry_after: float = 300.0
    max_total_wait: float = 600.0
    timeout: float = 15.0

    def backoff_delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """The jittered exponential wait after failed attempt number ``attempt`` (1-based)."""
        seconds = min(self.backoff_cap, self.backoff * 2 ** (attempt - 1))
        return seconds / 2 + (rng or random).uniform(0, seconds / 2)

    def retry_delay(self, response: requests.Response | Mapping[str, str] | float | None, attempt: int,
                    waited: float = 0.0, rng: random.Random | None = None) -> float | None:
        """Seconds to wait before retrying after failed attempt ``attempt`` (1-based), or None
        to give up. ``response`` is the answer (or its headers, or an already parsed
        Retry-After in seconds), None after a timeout or connection error; ``waited`` is what
        this request already waited."""
        if attempt > self.retries:
            return None
        if isinstance(response, (int, float)):
            retry_after = float(response)
        else:
            headers = getattr(response, "headers", response)
            retry_after = parse_retry_after(headers.get("Retry-After")) if headers is not None else None
        if retry_after is not None:
            if retry_after > self.max_retry_after:
                return None
            delay = retry_after
        else:
            delay = self.backoff_delay(attempt, rng)
        return delay if waited + delay <= self.max_total_wait else None

    def urllib3_retry(self) -> Retry:
        """The same policy as urllib3's ``Retry``, for a ``requests`` session. A Retry-After
        over ``max_retry_after`` is shortened to it rather than given up; the waits stay
        within ``retries * max(backoff_cap, max_retry_after)``."""
        return _PolicyRetry(
            total=self.retries, connect=self.retries, read=self.retries, status=self.retries, redirect=0,
            status_forcelist=sorted(RETRY_STATUSES | set(range(500, 600))),
            allowed_methods=None,  # every method: the callers send idempotent requests
            respect_retry_after_header=True, retry_after_max=int(self.max_retry_after),
            raise_on_status=False, raise_on_redirect=False, policy=self,
        )

    def session(self, headers: Mapping[str, str] | None = None) -> requests.Session:
        """A session that retries by this policy; no proxy or netrc lookups."""
        session = requests.Session()
        session.trust_env = False
        adapter = HTTPAdapter(max_retries=self.urllib3_retry())
        session.mount("http://", adapter)
        session.mount("https://", adapter)
        if headers:
            session.headers.update(headers)
        return session


class _PolicyRetry(Retry):
    """urllib3's ``Retry`` waiting ``RetryPolicy.backoff_delay`` between attempts (urllib3's own
    backoff does not wait before the first retry)."""

    def __init__(self, *args, policy: RetryPolicy | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.policy = policy or RetryPolicy()

    def new(self, **kwargs) -> "_PolicyRetry":
        retry = super().new(**kwargs)
        retry.policy = self.policy
        return retry

    def get_backoff_time(self) -> float:
        return self.policy.backoff_delay(len(self.history)) if self.history else 0.0
