"""Python 3.11 to 3.13 install stemforge (issue 28, item 1); CI keeps the suite on 3.11 and
smoke-builds the demo with the newest Python the machine has."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.specifiers import SpecifierSet

REPO = Path(__file__).resolve().parents[1]


def test_requires_python_admits_3_11_to_3_13():
    spec = SpecifierSet(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"])
    assert all(version in spec for version in ("3.11.7", "3.12.1", "3.13.0")), spec
    assert "3.10.13" not in spec


def test_ci_smoke_builds_the_demo_with_the_newest_python():
    ci = (REPO / ".ci" / "run").read_text()
    assert "make test" in ci
    assert "for version in 3.13 3.12" in ci and "stemforge\" build" in ci and "timeout" in ci


def test_an_installed_package_ships_every_data_file_the_code_reads():
    """A non-editable install (CI's smoke build) has the layouts and taxonomies: every tracked
    file under pipelines/ and assets/ that is not Python is matched by package-data."""
    import fnmatch
    import subprocess

    data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    tracked = subprocess.run(["git", "ls-files", "pipelines", "assets"], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout.split()
    missing = []
    for name in tracked:
        if name.endswith(".py"):
            continue
        shipped = any(
            name.startswith(package.replace(".", "/") + "/")
            and any(fnmatch.fnmatch(name[len(package) + 1:], pattern) for pattern in patterns)
            for package, patterns in data.items()
        )
        if not shipped:
            missing.append(name)
    assert not missing, missing
