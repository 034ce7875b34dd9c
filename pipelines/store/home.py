"""The data home: where every stage's output lives (README, "What `make demo` does", the data home tree)."""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

HOME_ENV = "STEMFORGE_HOME"
DEFAULT_HOME = "stemforge-data"


@dataclass(frozen=True)
class DataHome:
    root: Path

    @property
    def warehouse(self) -> Path:
        return self.root / "warehouse.duckdb"

    @property
    def lake(self) -> Path:
        return self.root / "lake"

    @property
    def images(self) -> Path:
        return self.root / "images"

    @property
    def raw(self) -> Path:
        """Crawler raw stores, one folder per source."""
        return self.root / "raw"

    @property
    def export(self) -> Path:
        return self.root / "export" / "stem" / "data"

    @property
    def reports(self) -> Path:
        return self.root / "reports"

    @property
    def dagster(self) -> Path:
        return self.root / "dagster"

    @property
    def cache(self) -> Path:
        """Model response caches and other reusable intermediate state."""
        return self.root / "cache"

    def lake_path(self, name: str) -> Path:
        return self.lake / f"{name}.parquet"


def resolve_home(explicit: str | os.PathLike | None = None) -> DataHome:
    """``--home`` if given, else ``$STEMFORGE_HOME``, else ``./stemforge-data``."""
    value = explicit or os.environ.get(HOME_ENV) or DEFAULT_HOME
    return DataHome(Path(value).expanduser().resolve())


def stable_file_stem(text: str) -> str:
    """A file-system-safe name for ``text`` that stays the same in every build: its readable
    part (at most 40 characters) and 8 hex digits of its sha256, so two texts never share one."""
    readable = re.sub(r"[^a-zA-Z0-9]+", "-", text).strip("-").lower()[:40]
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{readable}-{digest}" if readable else digest
