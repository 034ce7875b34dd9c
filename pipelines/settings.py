"""Build settings in one place, with their documented defaults.

The Dagster resource (``pipelines/resources.py``) and the command line both produce a
``BuildSettings``; library code only ever sees this plain object. Environment variables
give the defaults the UI and the schedules use.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from pipelines.store.home import DataHome, resolve_home

# The floor baselines, and the embedding baseline where its extra is installed (skipped otherwise).
DEFAULT_MODELS = ("random", "most-frequent-position", "longest-option", "embedding?threads=1")


def _env_list(name: str, default: tuple[str, ...]) -> tuple[str, ...]:
    value = os.environ.get(name)
    if not value:
        return default
    return tuple(part.strip() for part in value.split(",") if part.strip())


@dataclass(frozen=True)
class BuildSettings:
    home: str = ""  # resolved with resolve_home: --home, $STEMFORGE_HOME, ./stemforge-data
    sources: tuple[str, ...] = ("demo",)
    seed: int = 0
    # the bundled demo site
    demo_questions: int = 3000
    demo_faults: bool = False
    demo_revision: int = 0
    # crawling
    crawl_rate_per_host: float = 200.0
    crawl_concurrency: int = 8
    crawl_timeout: float = 10.0
    # "lastmod": a rebuild re-requests only pages whose sitemap lastmod changed; "all": every page
    crawl_revalidate: str = "lastmod"
    # the crawl budget: URLs a web source may have (links past it are not followed; endless pagination
    # stops there); a source's own ``max_urls=N`` (``http://HOST/?max_urls=N``) overrides it
    crawl_max_urls: int = 100_000
    # cleaning
    cap_per_skill: int = 2000
    # splitting
    split_train: float = 0.6
    split_valid: float = 0.2
    split_test: float = 0.2
    # evaluation
    models: tuple[str, ...] = DEFAULT_MODELS
    eval_splits: tuple[str, ...] = ("test",)
    bootstrap: int = 0  # 0: cluster-robust CLT intervals; N: a clustered bootstrap of N replicates
    # exam scores (pipelines/smartscore.py): "all" skills, or "paper": a seeded sample of 40 maths
    # and 30 science skills (engineering, technology all); skills with fewer test questions than
    # exam_min_questions are not scored
    exam_skills: str = "all"
    exam_min_questions: int = 5
    # profiles
    taxonomy: str = "stem"
    manual_tags: str = ""  # a CSV of manual CogME annotations, optional
    # export
    rows_per_shard: int = 5000

    @property
    def data_home(self) -> DataHome:
        return resolve_home(self.home or None)

    def with_(self, **changes) -> "BuildSettings":
        return replace(self, **changes)

    @classmethod
    def from_env(cls) -> "BuildSettings":
        """Defaults for the UI, schedules and sensors (``STEMFORGE_*`` variables)."""
        base = cls()
        return cls(
            home=os.environ.get("STEMFORGE_HOME", ""),
            sources=_env_list("STEMFORGE_SOURCES", base.sources),
            seed=int(os.environ.get("STEMFORGE_SEED", base.seed)),
            demo_questions=int(os.environ.get("STEMFORGE_DEMO_QUESTIONS", base.demo_questions)),
            models=_env_list("STEMFORGE_MODELS", base.models),
        )


# ---- the settings of a home's last build -------------------------------------------------

def built_settings_path(home: DataHome) -> Path:
    return home.lake / "state" / "build_settings.json"


def record_built_settings(home: DataHome, settings: BuildSettings) -> None:
    """After a successful ``stemforge build``: the settings it ran with (all but the home) are the
    ones a later ``stemforge eval`` rescores with."""
    from pipelines.store.atomic import atomic_write_text

    values = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(settings).items() if k != "home"}
    path = built_settings_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(values, sort_keys=True, indent=1) + "\n")


def built_settings(home: DataHome) -> BuildSettings:
    """The settings of the home's last successful build, with ``home`` set to it; the defaults
    where no build recorded them (a home from before the record). Raises ``ValueError`` naming the
    file when the record cannot be read as settings."""
    path = built_settings_path(home)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return BuildSettings(home=str(home.root))
    base = BuildSettings()
    try:
        recorded = json.loads(text)
        if not isinstance(recorded, dict):
            raise ValueError("not an object")
        values = {}
        for field in fields(BuildSettings):
            if field.name == "home" or field.name not in recorded:
                continue
            value, default = recorded[field.name], getattr(base, field.name)
            if isinstance(default, tuple):
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise ValueError(f"{field.name} is not a list of texts")
                value = tuple(value)
            elif type(value) is not type(default) and not (isinstance(default, float) and type(value) is int):
                raise ValueError(f"{field.name} is not a {type(default).__name__}")
            values[field.name] = value
    except ValueError as exc:
        raise ValueError(f"{path}: the last build's settings cannot be read ({exc}); run `stemforge build` again") from None
    return BuildSettings(home=str(home.root), **values)
