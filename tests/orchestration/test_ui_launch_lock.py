"""Runs launched the way the UI launches them (a job launch or backfill in its own run process,
the multiprocess executor) hold the data home's lock from their first step to their last, and
a CLI build started meanwhile is refused (issue 28, item 2)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import dagster as dg
import pytest

from pipelines.orchestration.executor import stemforge_executor
from pipelines.store.home import DataHome
from pipelines.store.homelock import home_lock, read_lock
from support.builds import home_instance

TWO_STEPS = textwrap.dedent(
    """
    import os, time
    from pathlib import Path
    import dagster as dg
    from assets.resources import StemforgeSettings
    from pipelines.orchestration.executor import stemforge_executor

    @dg.op
    def first(stemforge: StemforgeSettings):
        return 1

    @dg.op
    def second(value):  # needs no settings: a step process that takes no lock of its own
        folder = Path(os.environ["TEST_SIGNALS"])
        (folder / "second-started").write_text(str(os.getpid()))
        deadline = time.monotonic() + 120
        while not (folder / "go").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return value

    @dg.job(executor_def=stemforge_executor,
            resource_defs={"stemforge": StemforgeSettings(home=os.environ["STEMFORGE_HOME"], progress=False)})
    def two_steps():
        second(first())
    """
)


def launch(home: DataHome, tmp_path: Path, executor: str) -> subprocess.Popen:
    """``dagster job execute`` in its own process: the run process the UI's launcher starts."""
    module = tmp_path / "two_steps.py"
    module.write_text(TWO_STEPS)
    config = tmp_path / "run.yaml"
    config.write_text(f"execution:\n  config:\n    {executor}: {{}}\n")
    with home_instance(home):
        env = {**os.environ, "TEST_SIGNALS": str(tmp_path)}
    return subprocess.Popen(
        [sys.executable, "-m", "dagster", "job", "execute", "-f", str(module), "-j", "two_steps", "-c", str(config)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


def wait_for(path: Path, process: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if process.poll() is not None:
            pytest.fail(f"the run ended early:\n{process.stdout.read()[-3000:]}")
        assert time.monotonic() < deadline, "the run did not reach its second step"
        time.sleep(0.1)


def cli_build(home: DataHome) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipelines.orchestration.cli", "build", "--home", str(home.root), "--quiet"],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("executor", ["multiprocess", "in_process"])
def test_a_ui_style_run_holds_the_lock_between_and_during_all_its_steps(tmp_path, executor):
    home = DataHome(tmp_path / "home")
    run = launch(home, tmp_path, executor)
    try:
        wait_for(tmp_path / "second-started", run)
        holder = read_lock(home)
        assert holder.get("command", "").startswith("dagster run") and holder.get("run_id")
        refused = cli_build(home)  # started during the run's second step, which uses no settings
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert refused.stderr.count("\n") == 1 and "another stemforge process is writing" in refused.stderr
        assert "dagster run" in refused.stderr
        (tmp_path / "go").write_text("")
        out, _ = run.communicate(timeout=180)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, out[-3000:]
    with home_lock(home, "build"):  # released when the run ended
        pass


def test_a_ui_style_multiprocess_run_launched_during_a_build_fails_before_any_step(tmp_path):
    home = DataHome(tmp_path / "home")
    (tmp_path / "go").write_text("")
    hold = "import sys, time\nfrom pathlib import Path\nfrom pipelines.store.home import DataHome\n" \
           "from pipelines.store.homelock import home_lock\nwith home_lock(DataHome(Path(sys.argv[1])), 'build'):\n" \
           "    print('held', flush=True)\n    time.sleep(120)\n"
    holder = subprocess.Popen([sys.executable, "-c", hold, str(home.root)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        run = launch(home, tmp_path, "multiprocess")
        out, _ = run.communicate(timeout=180)
    finally:
        holder.kill()
        holder.wait()
    assert run.returncode != 0
    assert "another stemforge process is writing" in out and "build pid" in out
    assert not (tmp_path / "second-started").exists()
    assert "STEP_START" not in out


def test_every_job_the_ui_can_launch_uses_the_locking_executor():
    from pipelines.orchestration.definitions import defs

    jobs = [defs.resolve_job_def(name) for name in ("stemforge_build", "stemforge_refresh")]
    jobs.append(defs.resolve_implicit_global_asset_job_def())  # backfills and "Materialize"
    for job in jobs:
        assert job.executor_def is stemforge_executor, job.name


def test_launching_the_build_without_a_partition_fails_with_one_line(tmp_path):
    from pipelines.orchestration.definitions import build_job_definition

    home = DataHome(tmp_path / "home")
    with home_instance(home):
        result = dg.execute_job(
            dg.reconstructable(build_job_definition), instance=dg.DagsterInstance.get(), raise_on_error=False,
            run_config={"resources": {"stemforge": {"config": {"home": str(home.root), "progress": False}}}},
        )
        assert not result.success
        (failure,) = [e for e in result.all_events if e.event_type_value == "PIPELINE_FAILURE"]
    message = failure.event_specific_data.error.message
    assert "no source partition" in message and "stemforge build" in message
    assert not [e for e in result.all_events if e.event_type_value == "STEP_START"]
