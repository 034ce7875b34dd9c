"""One writer per data home: ``<home>/build.lock``.

A build (and ``stemforge eval``, which imports and rescores) holds an exclusive ``flock`` on
the lock file for as long as it runs and records its pid, process start time, host, command
and start time in it. A second writer is refused at once with one line naming the running
one. The kernel drops the ``flock`` when the holder exits, however it exits (SIGKILL
included), so a lock file left behind by a killed build is stale: the next writer finds
the recorded pid gone (``process_alive``), says so, and takes the lock over.

Re-entrant within a process: ``run_build`` takes the lock, and so do the commands that call
it while holding it already. A process whose ancestor holds the lock (the step processes of a
multiprocess build) works under it, and so does a step process of the Dagster run that holds
it (``run_id``). Every Dagster run takes it through its settings resource, so runs launched
from the UI, the schedule or the sensor are refused while a build runs, and the other way
round; they execute their steps in one process, which holds the lock for the whole run.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from pathlib import Path
from typing import Callable, Iterator

from pipelines.store.home import DataHome
from pipelines.store.atomic import process_alive, process_start

LOCK_NAME = "build.lock"
_held: dict[Path, int] = {}  # lock path -> depth, for this process


class HomeBusy(RuntimeError):
    """Another process is writing this data home; the message is one line."""


def lock_path(home: DataHome) -> Path:
    return home.root / LOCK_NAME


def read_lock(home: DataHome) -> dict:
    try:
        return json.loads(lock_path(home).read_text() or "{}")
    except (OSError, ValueError):
        return {}


def describe_holder(record: dict) -> str:
    started = record.get("started_at")
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)) if isinstance(started, (int, float)) else "?"
    return f"{record.get('command', 'build')} pid {record.get('pid', '?')} on {record.get('host', '?')}, started {when}"


def ancestor_pids(pid: int | None = None) -> set[int]:
    """The pids of this process's parent, its parent's parent, ... (from ``/proc``)."""
    found: set[int] = set()
    pid = os.getppid() if pid is None else pid
    while pid > 1 and pid not in found:
        found.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rpartition(")")[2].split()[1])
    return found


@contextlib.contextmanager
def home_lock(
    home: DataHome, command: str = "build", log: Callable[[str], None] | None = None, run_id: str | None = None
) -> Iterator[None]:
    """Hold the data home's write lock, or raise ``HomeBusy`` naming the holder."""
    path = lock_path(home)
    if _held.get(path):
        _held[path] += 1
        try:
            yield
        finally:
            _held[path] -= 1
        return
    home.root.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = read_lock(home)
            if holder.get("pid") in ancestor_pids() or (run_id and holder.get("run_id") == run_id):
                yield
                return
            raise HomeBusy(
                f"another stemforge process is writing {home.root} ({describe_holder(read_lock(home))}); "
                "wait for it to finish"
            ) from None
        previous = read_lock(home)
        pid = previous.get("pid")
        if isinstance(pid, int) and log is not None and not process_alive(pid, previous.get("process_start", "")):
            log(f"taking over the lock of an earlier {describe_holder(previous)} that ended without releasing it")
        record = {
            "pid": os.getpid(),
            "process_start": process_start(os.getpid()),
            "host": socket.gethostname(),
            "command": command,
            "started_at": time.time(),
            **({"run_id": run_id} if run_id else {}),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(record) + "\n").encode(), 0)
        _held[path] = 1
        try:
            yield
        finally:
            _held.pop(path, None)
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
    finally:
        os.close(fd)
