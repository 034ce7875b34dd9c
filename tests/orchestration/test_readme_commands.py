"""The README's corpus commands run as written after `make demo` (issue 28, item 4), and the
commands stemforge prints run as printed (item 7)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

from pipelines.ingest.source_changes import built_sources, record_built_sources
from pipelines.orchestration.cli import build_parser
from pipelines.store.home import DataHome, resolve_home

REPO = Path(__file__).resolve().parents[2]


def readme_build_commands() -> list[str]:
    readme = (REPO / "README.md").read_text()
    commands = re.findall(r"^\.venv/bin/stemforge build --source .*$", readme, flags=re.M)
    commands += re.findall(r"`(\.venv/bin/stemforge build --source [^`]+)`", readme)
    return commands


def test_every_readme_source_command_builds_into_a_home_of_its_own(tmp_path, monkeypatch):
    commands = readme_build_commands()
    assert len(commands) >= 9
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("STEMFORGE_HOME", raising=False)  # after `make demo`: the default home
    demo = resolve_home(None)  # where `make demo` builds: ./stemforge-data
    demo.root.mkdir()
    record_built_sources(demo, ["demo"])
    homes = set()
    for command in commands:
        args = build_parser().parse_args(shlex.split(command)[1:])
        assert args.home, command
        home = resolve_home(args.home)
        assert home != demo, command
        homes.add(home)
        assert built_sources(home) is None  # a new home: nothing of the demo's to remove
    assert len(homes) == len(commands)


def test_the_readme_says_how_homes_and_sources_relate():
    readme = (REPO / "README.md").read_text()
    assert "A data home holds what the\nsources of its last successful build make" in readme


def test_printed_commands_run_as_printed(tmp_path):
    """The build summary's `sql` and `ui` lines name this environment's stemforge as it can be
    run from the current folder (`.venv/bin/stemforge` after `make demo`)."""
    from pipelines.orchestration.run import build_summary

    home = DataHome(tmp_path / "home")
    home.root.mkdir()
    code = ("from pathlib import Path; from pipelines.orchestration.run import build_summary; "
            "from pipelines.store.home import DataHome; "
            f"print(build_summary(DataHome(Path({str(home.root)!r})), False, [], 'r'))")
    summary = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True).stdout
    (line,) = [x for x in summary.splitlines() if x.startswith("Dagster UI:")]
    command = shlex.split(line.partition(":")[2])
    assert command[0] != "stemforge" or subprocess.run(["which", "stemforge"], capture_output=True).returncode == 0
    ran = subprocess.run([*command[:-3], "ui", "--help"], capture_output=True, text=True, cwd=REPO)
    assert ran.returncode == 0 and "--port" in ran.stdout, (command, ran.stderr)
    assert build_summary(home, False, [], "r")
