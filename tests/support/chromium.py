"""Headless Chromium as the tests run it: Debian's package, a fresh profile per try, one retry.

On a loaded two-core machine a render that takes 5 s alone can hang past any limit (CI saw
one screenshot of the Dagster UI pass 90 s while the other test worker ran). A try that runs
out of time is killed with every process it started, and tried once more with a new profile;
a second timeout fails the test with what Chromium printed.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage",
)


def executable() -> str:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    pytest.fail("Debian's chromium package is not installed; `make test` installs it")


def run_headless(args: list[str], profile: Path, *, timeout: float = 120, tries: int = 2) -> subprocess.CompletedProcess:
    """Chromium with ``FLAGS`` and ``args`` (the output flag and the URL last); text output.

    ``profile`` names the profile folder; try ``n`` uses ``profile-n`` so a killed try's lock
    files cannot stop the next. A non-zero exit fails the test at once: it is not a timeout.
    """
    for attempt in range(1, tries + 1):
        folder = profile.with_name(f"{profile.name}-{attempt}")
        folder.mkdir(parents=True, exist_ok=True)
        command = [executable(), *FLAGS, f"--user-data-dir={folder}", *args]
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            continue
        done = subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
        assert done.returncode == 0, f"chromium exited with {done.returncode}: {stderr[-1500:]}"
        return done
    pytest.fail(f"chromium did not finish {args[-1]} within {timeout:.0f} s in {tries} tries")


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.communicate()
