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

A response's body has a deadline as a whole, not just per receive: ``read_body`` reads what
each receive returns and lets the socket wait no longer than the time left, so a server that
drip-feeds its body (slow-loris: a byte every few seconds, each within the read timeout) costs
the deadline, not hours. The crawler and the site probe read with it; ``policy.session()``
applies it to every response its callers do not stream (``ResponseDeadline``, a
``requests.Timeout``, past ``timeout`` seconds; ``BodyTooLarge`` past ``max_body_bytes``).
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
MAX_BODY_BYTES = 64 * 1024 * 1024  # what a session reads of one unstreamed response
_CHUNK = 64 * 1024


class ResponseDeadline(requests.exceptions.Timeout):
    """A response body not read in full before its deadline (a drip-fed body), or one receive
    that waited past the read timeout; a ``requests.Timeout``, so clients retry it as one."""


class BodyTooLarge(requests.exceptions.RequestException):
    """A response body over the reader's limit."""


def read_body(response: requests.Response, deadline: float, limit: int, truncate: bool = False,
              receive_timeout: float | None = None) -> tuple[bytes, bool]:
    """(body, read to the end) of a streamed ``response`` by ``deadline`` (``time.monotonic()``);
    over ``limit`` bytes: the first ``limit`` if ``truncate``, else ``BodyTooLarge``. The deadline is
    checked continuously: each read returns what one receive got (``read1``), and the socket
    waits no longer than the time left (nor ``receive_timeout``), so a drip-fed body raises
    ``ResponseDeadline`` at the deadline."""
    import urllib3.exceptions

    chunks: list[bytes] = []
    total = 0
    sock = getattr(getattr(response.raw, "_connection", None), "sock", None)
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise ResponseDeadline(f"response not read in full within its deadline ({total:,} bytes read)")
        if sock is not None:
            sock.settimeout(left if receive_timeout is None else min(left, receive_timeout))
        try:
            chunk = response.raw.read1(_CHUNK, decode_content=True)
        except (urllib3.exceptions.ReadTimeoutError, TimeoutError):
            raise ResponseDeadline(f"read timed out ({total:,} bytes read)") from None
        if not chunk:
            break
        total += len(chunk)
        chunks.append(chunk)
        if total > limit:
            if truncate:
                return b"".join(chunks)[:limit], False
            raise BodyTooLarge(f"response body over {limit:,} bytes")
        if time.monotonic() > deadline:
            raise ResponseDeadline(f"response not read in full within its deadline ({total:,} bytes read)")
    return (chunks[0] if len(chunks) == 1 else b"".join(chunks)), True


class DeadlineSession(requests.Session):
    """A ``requests.Session`` whose unstreamed responses are read with ``read_body``: the body
    within ``deadline`` seconds of the headers (and at most ``max_body`` bytes), whatever the
    server's pace. A streamed response (``stream=True``) is the caller's to read with ``read_body``."""

    def __init__(self, deadline: float, max_body: int = MAX_BODY_BYTES):
        super().__init__()
        self.deadline = deadline
        self.max_body = max_body

    def request(self, method, url, *args, **kwargs) -> requests.Response:
        stream = kwargs.pop("stream", False)
        response = super().request(method, url, *args, stream=True, **kwargs)
        if stream:
            return response
        try:
            body, _ = read_body(response, time.monotonic() + self.deadline, self.max_body)
        except BaseException:
            response.close()
            raise
        response._content = body
        response._content_consumed = True
        response.raw.release_conn()  # read to the end: back to the pool for keep-alive
        return response


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

    def session(self, headers: Mapping[str, str] | None = None, max_body: int = MAX_BODY_BYTES) -> requests.Session:
        """A session that retries by this policy and reads each unstreamed body within ``timeout``
        seconds (``DeadlineSession``); no proxy or netrc lookups."""
        session = DeadlineSession(self.timeout, max_body)
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
