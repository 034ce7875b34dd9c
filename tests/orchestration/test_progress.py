"""The first run is talkative (issue 28, item 6): every step says when it starts and ends and,
while it runs long, that it still runs; the one-time numba compile is announced."""

from __future__ import annotations

import sys
import time

import dagster as dg

from pipelines import compiled
from pipelines.orchestration import definitions


def test_a_long_step_says_it_still_runs(monkeypatch, capsys):
    monkeypatch.setattr(definitions, "HEARTBEAT_SECONDS", 1.0)

    @dg.op
    def slow():
        time.sleep(2.6)

    @dg.job(logger_defs={"console": definitions.one_line_console})
    def one_slow_step():
        slow()

    result = one_slow_step.execute_in_process(run_config={"loggers": {"console": {"config": {"log_level": "INFO"}}}})
    assert result.success
    err = capsys.readouterr().err
    assert 'slow - STEP_START - Started execution of step "slow"' in err
    assert "slow - still running (1 s)" in err and "slow - still running (2 s)" in err
    assert "slow - STEP_SUCCESS" in err
    lines = err.splitlines()
    assert all(" - DEBUG - " not in line for line in lines)


def test_a_quiet_build_stays_quiet(capsys):
    @dg.op
    def quick():
        pass

    @dg.job(logger_defs={"console": definitions.one_line_console})
    def one_step():
        quick()

    assert one_step.execute_in_process(run_config={"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}).success
    assert capsys.readouterr().err == ""


def test_the_numba_compile_is_announced_until_cached(tmp_path, monkeypatch):
    package = tmp_path / "kernels_pkg"
    (package / "__pycache__").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "kern.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setitem(compiled.KERNELS, "stage_x", ("kernels_pkg.kern",))
    said = []
    assert compiled.announce_compile("stage_x", said.append) is True
    assert "kern" in said[0] and "once per installation" in said[0]
    tag = f"py{sys.version_info.major}{sys.version_info.minor}"
    (package / "__pycache__" / f"kern.f-3.{tag}.nbi").write_text("")
    assert compiled.announce_compile("stage_x", said.append) is False and len(said) == 1


def test_the_kernels_cache_to_disk():
    """``cache=True`` on every numba function, so the compile happens once per installation."""
    import re
    from pathlib import Path

    for modules in compiled.KERNELS.values():
        for module in modules:
            source = Path(__import__(module, fromlist=["_"]).__file__).read_text()
            decorators = re.findall(r"^@(?:numba\.)?n?jit\b.*$", source, flags=re.M)
            assert decorators and all("cache=True" in d for d in decorators), (module, decorators)


def test_eval_shows_progress_at_a_terminal(monkeypatch):
    from pipelines.orchestration.cli import build_parser, show_progress

    args = build_parser().parse_args(["eval", "--list"])
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    assert show_progress(args)
    assert not show_progress(build_parser().parse_args(["eval", "--list", "--quiet"]))
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    assert not show_progress(args)


def test_a_step_with_its_own_bar_is_not_interrupted(monkeypatch, capsys):
    from tqdm import tqdm

    monkeypatch.setattr(definitions, "HEARTBEAT_SECONDS", 1.0)

    @dg.op
    def with_bar():
        with tqdm(total=3, desc="work") as bar:
            for _ in range(3):
                time.sleep(0.9)
                bar.update(1)

    @dg.job(logger_defs={"console": definitions.one_line_console})
    def barred():
        with_bar()

    assert barred.execute_in_process(run_config={"loggers": {"console": {"config": {"log_level": "INFO"}}}}).success
    assert "still running" not in capsys.readouterr().err
