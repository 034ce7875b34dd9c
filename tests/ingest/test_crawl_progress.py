"""The crawl's progress bar only moves forward and ends at 100% though links keep adding URLs
(issue 28, item 6: the demo crawl's total grows from 3,483 to 10,543 URLs)."""

from __future__ import annotations

import io
import re
import sys
from types import SimpleNamespace

from pipelines.ingest.crawl import engine


def test_the_crawl_bar_never_goes_back_and_reaches_100_percent(monkeypatch):
    stderr = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    report = SimpleNamespace(finished=0, stored=0, failed_total=0)
    frontier = SimpleNamespace(left=3483, remaining=lambda: frontier.left)
    progress = engine._Progress(SimpleNamespace(progress=True, progress_interval=0.0), report, frontier)
    shown = []
    # each step finishes 500 URLs and discovers links to 900 more until 10,543 are known
    while frontier.left:
        done = min(500, frontier.left)
        report.finished += done
        report.stored += done
        frontier.left -= done
        if report.finished + frontier.left < 10543:
            frontier.left += min(900, 10543 - report.finished - frontier.left)
        progress.update(done, force=True)
        shown.append(progress.bar.n)
    progress.close(complete=True)
    assert shown == sorted(shown) and shown[-1] == 99, shown  # 100% only once the crawl is complete
    percentages = [int(p) for p in re.findall(r"crawl:\s+(\d+)%", stderr.getvalue())]
    assert percentages == sorted(percentages) and percentages[-1] == 100
    assert "urls=10543/10543" in stderr.getvalue()
