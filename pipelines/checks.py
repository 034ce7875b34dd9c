"""The data quality checks behind the Dagster asset checks: a registry of plain functions.

A check is a function ``(home, settings) -> CheckOutcome`` registered with ``@quality_check``
and the lake files it reads; the flow folders define theirs (``pipelines/clean/checks.py``,
``pipelines/dataset/checks.py``). ``run_check`` memoizes a check on the content of those
files, its settings and its code (``pipelines.store.memo``), so a rebuild that changed nothing
does not pay for the checks again.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from pipelines.settings import BuildSettings
from pipelines.store.home import DataHome
from pipelines.store.memo import memoized

CHECK_MODULES = ("pipelines.clean.checks", "pipelines.dataset.checks")


@dataclass(frozen=True)
class CheckOutcome:
    passed: bool
    description: str
    metadata: dict = field(default_factory=dict)


@dataclass(frozen=True)
class QualityCheck:
    name: str
    function: Callable[[DataHome, BuildSettings], CheckOutcome]
    inputs: Callable[[DataHome], list[Path]]  # the files it reads: its memo inputs
    settings: Callable[[BuildSettings], dict] | None = None


CHECKS: dict[str, QualityCheck] = {}


def quality_check(inputs: Callable[[DataHome], list[Path]], settings: Callable[[BuildSettings], dict] | None = None):
    """Register the decorated function as the quality check of its name."""

    def register(function):
        CHECKS[function.__name__] = QualityCheck(function.__name__, function, inputs, settings)
        return function

    return register


def get_check(name: str) -> QualityCheck:
    if name not in CHECKS:
        for module in CHECK_MODULES:
            importlib.import_module(module)
    return CHECKS[name]


def run_check(name: str, settings: BuildSettings) -> CheckOutcome:
    """Run check ``name`` unless its inputs, settings and code are unchanged since it last ran."""
    check = get_check(name)
    home = settings.data_home

    def compute() -> dict:
        outcome = check.function(home, settings)
        return {"passed": outcome.passed, "description": outcome.description, "metadata": outcome.metadata}

    figures = memoized(
        home, f"check-{name}", compute,
        inputs=check.inputs(home),
        settings=check.settings(settings) if check.settings else None,
        code=check.function,
    )
    return CheckOutcome(bool(figures["passed"]), figures["description"], dict(figures.get("metadata") or {}))
