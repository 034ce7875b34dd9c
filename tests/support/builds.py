"""In-process builds for tests: the Dagster instance of a data home, with the environment put
back afterwards (``prepare_instance`` points DAGSTER_HOME and STEMFORGE_HOME at the home)."""

from __future__ import annotations

import contextlib
import os
from typing import Iterator

from pipelines.orchestration.cli import prepare_instance
from pipelines.store.home import DataHome

INSTANCE_VARIABLES = ("DAGSTER_HOME", "STEMFORGE_HOME")


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
