"""Failed blocking checks of a data home, remembered until the check passes again.

Dagster skips what is downstream of a failed blocking check within its run. A later run that
selects only downstream assets (``stemforge eval`` rescoring, ``--select``) would still
publish the lake's unchecked tables, so each failed blocking check is also recorded in
``lake/state/blocked.json``; the warehouse refuses to publish while any is recorded, and the
record is cleared when the check passes.
"""

from __future__ import annotations

import json

from pipelines.store.home import DataHome
from pipelines.store.atomic import atomic_write_text


def _path(home: DataHome):
    return home.lake / "state" / "blocked.json"


def blocked_checks(home: DataHome) -> dict[str, str]:
    try:
        return dict(json.loads(_path(home).read_text()))
    except (OSError, ValueError):
        return {}


def record_check(home: DataHome, name: str, passed: bool, reason: str) -> None:
    current = blocked_checks(home)
    if passed and name not in current:
        return
    if passed:
        current.pop(name)
    else:
        current[name] = reason
    if current:
        atomic_write_text(_path(home), json.dumps(current, sort_keys=True, indent=1))
    else:
        _path(home).unlink(missing_ok=True)
