"""In-process builds for tests: the Dagster instance of a data home, with the environment put
back afterwards (``prepare_instance`` points DAGSTER_HOME and STEMFORGE_HOME at the home)."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

from pipelines.orchestration.cli import main, prepare_instance
from pipelines.store.home import DataHome

INSTANCE_VARIABLES = ("DAGSTER_HOME", "STEMFORGE_HOME")
REPO = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def home_instance(home: DataHome) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in INSTANCE_VARIABLES}
    prepare_instance(home)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def data_file_digests(home: DataHome) -> dict[str, str]:
    """sha256 of every lake and export file, leaving out the run records under ``lake/state/``
    (stage fingerprints and reuse states name their files' identities, mtime_ns, not data)."""
    import hashlib

    files = {}
    for folder in (home.lake, home.export.parent):
        for path in sorted(folder.rglob("*")):
            relative = path.relative_to(home.root).as_posix()
            record = relative.startswith("lake/state/") and relative.endswith((".json", ".json.sha256"))
            if path.is_file() and not relative.startswith("lake/state/fingerprints/") and not record:
                files[relative] = hashlib.sha256(path.read_bytes()).hexdigest()
    return files


def stemforge_build(home: Path, *sources: str) -> subprocess.CompletedProcess:
    """``stemforge build`` of ``sources`` into ``home``, as a user runs it, for tests of the import:
    with the cheapest model (the embedding model's load costs 11 s a build)."""
    command = [sys.executable, "-m", "pipelines.orchestration.cli", "build", "--home", str(home), "--quiet",
               "--model", "random"]
    for source in sources:
        command += ["--source", source]
    return subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=900)


def stemforge_in_process(home: DataHome, *args: str) -> subprocess.CompletedProcess:
    """``stemforge ARGS --home HOME`` run inside this process with its output captured: the
    result a user's subprocess gives, without the 3 s every start pays for the dagster imports.
    For tests of what a command says and does; a test of the process itself (a lock held by a
    live or killed process, exit-time output, query limits) runs the subprocess."""
    out, err = io.StringIO(), io.StringIO()
    argv = [*args, "--home", str(home.root)]
    debug = os.environ.pop("STEMFORGE_DEBUG", None)
    try:
        with home_instance(home), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:  # argparse's refusals
                code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    finally:
        if debug is not None:
            os.environ["STEMFORGE_DEBUG"] = debug
    return subprocess.CompletedProcess(["stemforge", *argv], code, out.getvalue(), err.getvalue())
