"""Runs launched outside ``stemforge build`` (the UI, the schedule, the sensor) take the data
home's write lock too: through the settings resource every Dagster run uses."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import dagster as dg
import pytest

from assets.resources import StemforgeSettings
from pipelines.orchestration.definitions import build_job_definition
from pipelines.settings import BuildSettings
from pipelines.store.home import DataHome
from pipelines.store.homelock import HomeBusy, ancestor_pids, home_lock, lock_path
from support.builds import home_instance

HOLD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from pipelines.store.home import DataHome
    from pipelines.store.homelock import home_lock
    with home_lock(DataHome(Path(sys.argv[1])), "build"):
        print("held", flush=True)
        time.sleep(60)
    """
)


@pytest.fixture
def held_home(tmp_path):
    """A data home whose lock another process (a running build) holds."""
    home = DataHome(tmp_path / "home")
    home.root.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(home.root)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    yield home
    holder.kill()
    holder.wait()


def test_the_settings_resource_holds_the_lock_while_a_run_executes(tmp_path):
    home = DataHome(tmp_path / "home")
    resource = StemforgeSettings.from_settings(BuildSettings(home=str(home.root)), progress=False)
    with resource.yield_for_execution(dg.build_init_resource_context(resources={})):
        assert '"command": "dagster run' in lock_path(home).read_text()
    assert lock_path(home).read_text() == ""


def test_the_settings_resource_is_refused_while_a_build_holds_the_home(held_home):
    resource = StemforgeSettings.from_settings(BuildSettings(home=str(held_home.root)), progress=False)
    with pytest.raises(HomeBusy, match=r"writing .* \(build pid \d+"):
        with resource.yield_for_execution(dg.build_init_resource_context(resources={})):
            pass


def test_a_run_launched_like_the_ui_is_refused_while_a_build_holds_the_home(held_home):
    """The job's default config (what the UI, schedule and sensor launch with): one in-process
    executor whose settings resource takes the lock; it fails naming the running build."""
    config = StemforgeSettings.from_settings(BuildSettings(home=str(held_home.root)), progress=False).model_dump()
    with home_instance(held_home):
        result = dg.execute_job(
            dg.reconstructable(build_job_definition),
            instance=dg.DagsterInstance.get(),
            run_config={"resources": {"stemforge": {"config": config}}},
            raise_on_error=False,
        )
        assert not result.success
        failures = [e for e in result.all_events if e.is_failure]
        assert failures
        message = failures[0].event_specific_data.error.message if failures[0].event_specific_data else ""
        run = dg.DagsterInstance.get().get_run_by_id(result.run_id)
    assert "another stemforge process is writing" in message and "build pid" in message
    assert run.run_config.get("execution") is None  # the job's own default: in process


def test_step_processes_of_the_run_holding_the_lock_work_under_it(held_home):
    """A multiprocess run launched from the UI: its first step process holds the lock; its
    other step processes (siblings, not descendants) work under it; other runs do not."""
    held = DataHome(held_home.root.parent / "by-run")
    step = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        from pipelines.store.home import DataHome
        from pipelines.store.homelock import home_lock
        with home_lock(DataHome(Path(sys.argv[1])), "step", run_id=sys.argv[2]):
            print("worked")
        """
    )
    out = held.root.parent / "sibling.out"
    with home_lock(held, "dagster run", run_id="run-1"):
        # started through a shell that exits at once: the step is re-parented, not our descendant
        subprocess.run(["sh", "-c", f'"{sys.executable}" -c "$0" "$1" "$2" > "$3" 2>&1 &', step, str(held.root),
                        "run-1", str(out)], check=True, timeout=60)
        deadline = time.monotonic() + 60
        while "worked" not in (out.read_text() if out.exists() else "") and time.monotonic() < deadline:
            time.sleep(0.2)
    assert out.read_text().strip() == "worked"
    other = subprocess.run([sys.executable, "-c", step, str(held_home.root), "run-2"],
                           capture_output=True, text=True, timeout=60)
    assert other.returncode != 0 and "another stemforge process is writing" in other.stderr


def test_the_schedule_launches_in_process_runs(tmp_path):
    from pipelines.orchestration.definitions import full_rebuild_schedule

    home = DataHome(tmp_path / "home")
    with home_instance(home):
        context = dg.build_schedule_context(instance=dg.DagsterInstance.get())
        (request,) = full_rebuild_schedule.evaluate_tick(context).run_requests
    assert request.run_config == {"execution": {"config": {"in_process": {}}}}


def test_step_processes_of_a_build_work_under_their_ancestors_lock(tmp_path):
    home = DataHome(tmp_path / "home")
    child = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        from pipelines.store.home import DataHome
        from pipelines.store.homelock import home_lock
        with home_lock(DataHome(Path(sys.argv[1])), "step"):
            print("worked")
        """
    )
    with home_lock(home, "build"):
        # a grandchild (as a step process under a forkserver): sh -> python
        out = subprocess.run(["sh", "-c", f'"{sys.executable}" -c \'{child}\' "{home.root}"'],
                             capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "worked", out.stderr


def test_an_unrelated_process_is_still_refused(held_home):
    with pytest.raises(HomeBusy, match="another stemforge process is writing"):
        with home_lock(held_home, "build"):
            pass


def test_ancestor_pids_walks_up_to_init():
    import os

    found = ancestor_pids()
    assert os.getppid() in found and os.getpid() not in found and 1 not in found
