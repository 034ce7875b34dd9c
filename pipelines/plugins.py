"""Registries that find their members by importing every module of a package (sources in
``ingest/importers/``, models in ``evaluation/models/``): the one loader they share."""

from __future__ import annotations

import importlib
import pkgutil


def import_package_modules(package: str) -> None:
    """Import every module of ``package``, in name order, so their registrations run."""
    path = importlib.import_module(package).__path__
    for module in sorted(m.name for m in pkgutil.iter_modules(path)):
        importlib.import_module(f"{package}.{module}")
