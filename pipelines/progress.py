"""Progress of a long stage that only moves forward and ends at 100%.

A stage reports the share of its work done (or a count of a total, with a few words on what it
counts); ``ForwardProgress`` keeps the highest whole percent reached, 99% at most until the work
is complete, then 100%. It shows that as a tqdm bar on stderr (the crawl's bar) and/or says it in
log lines (the image index's and dedup's, through the step's Dagster log: the console at INFO,
beside the step's start, end and 'still running' lines, and the run's event log in the UI): one
when the percent moved and ``every`` seconds passed since the last, and always the 100% line.
"""

from __future__ import annotations

import sys
import time
from typing import Callable

Log = Callable[[str], None]
EVERY_SECONDS = 10.0  # the least time between two log lines (the last, 100%, is always said)


class ForwardProgress:
    SCALE = 100

    def __init__(self, desc: str, *, bar: bool = False, log: Log | None = None, every: float | None = None):
        self.desc = desc
        self.log = log
        self.every = EVERY_SECONDS if every is None else every
        self.percent = 0  # the highest whole percent reached
        self.detail = ""
        self._said_at: float | None = None
        self.bar = None
        if bar:
            from tqdm import tqdm

            self.bar = tqdm(
                total=self.SCALE, file=sys.stderr, dynamic_ncols=True, desc=desc,
                bar_format="{desc}: {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}{postfix}]",
            )

    def advance(self, share: float, detail: str = "", complete: bool = False) -> None:
        """Move to ``share`` (0..1) of the work, never back; ``complete`` shows 100%."""
        target = self.SCALE if complete else min(self.SCALE - 1, max(0, int(share * self.SCALE)))
        moved = target > self.percent
        if moved:
            self.percent = target
            if self.bar is not None:
                self.bar.update(target - self.bar.n)
        if detail:
            self.detail = detail
            if self.bar is not None:
                self.bar.set_postfix_str(detail, refresh=False)
        if self.log is not None and moved:
            now = time.monotonic()
            if complete or self._said_at is None or now - self._said_at >= self.every:
                self._said_at = now
                self.log(f"{self.desc}: {self.percent}%" + (f" ({self.detail})" if self.detail else ""))

    def count(self, done: int, total: int, what: str, within: tuple[float, float] = (0.0, 1.0)) -> None:
        """``done`` of ``total`` ``what`` (``pictures indexed``), the part ``within`` of the work;
        all of the last part completes it."""
        start, end = within
        share = start + (end - start) * (done / total if total else 1.0)
        self.advance(share, f"{what} {done:,}/{total:,}", complete=end >= 1.0 and done >= total)

    def close(self, complete: bool = False) -> None:
        if complete:
            self.advance(1.0, complete=True)
        if self.bar is not None:
            self.bar.close()
