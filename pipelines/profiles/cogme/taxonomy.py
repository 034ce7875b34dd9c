"""CogME taxonomies as data: TARGET, CONTENT and THINKING sub-components and THINKING weights.

A taxonomy is a YAML file (see ``taxonomies/``). ``load_taxonomy('stem')`` and
``load_taxonomy('cogme')`` load the bundled ones; any other argument is a path.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

COMPONENTS = ("TARGET", "CONTENT", "THINKING")
THINKING_LEVELS = ("Recall", "Grasping", "Reasoning")
PAPER_LIMITS = {"TARGET": 3, "CONTENT": 3, "THINKING": 1}

_BUNDLED = {
    "stem": Path(__file__).with_name("taxonomies") / "stem.yaml",
    "cogme": Path(__file__).with_name("taxonomies") / "cogme_original.yaml",
}


class TaxonomyError(ValueError):
    """A taxonomy file is missing or malformed (one-line message)."""


@dataclass(frozen=True)
class Component:
    name: str
    description: str
    sub_components: dict[str, str]  # sub-component name -> definition, in file order

    def names(self) -> tuple[str, ...]:
        return tuple(self.sub_components)


@dataclass(frozen=True)
class Taxonomy:
    name: str
    version: int
    description: str
    components: dict[str, Component]
    limits: dict[str, int]
    thinking_weights: dict[str, int]

    def sub_components(self, component: str) -> tuple[str, ...]:
        return self.components[component].names()

    def weight(self, thinking: str) -> int:
        return self.thinking_weights[thinking]

    def has(self, component: str, sub_component: str) -> bool:
        return component in self.components and sub_component in self.components[component].sub_components

    def resolve(self, component: str, label: str) -> str | None:
        """The sub-component named ``label`` (case and surrounding space ignored), or None."""
        wanted = " ".join(label.split()).casefold()
        for name in self.components[component].sub_components:
            if name.casefold() == wanted:
                return name
        return None


def load_taxonomy(name_or_path: str | Path = "stem") -> Taxonomy:
    """Load a bundled taxonomy by name ('stem', 'cogme') or a YAML file by path."""
    key = str(name_or_path)
    path = _BUNDLED.get(key, Path(key))
    if not path.is_file():
        raise TaxonomyError(f"taxonomy {key!r}: not a bundled name ({', '.join(_BUNDLED)}) nor an existing file")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise TaxonomyError(f"taxonomy {path.name}: invalid YAML: {first}") from None
    except RecursionError:
        raise TaxonomyError(f"taxonomy {path.name}: invalid YAML: nested too deep") from None
    except UnicodeDecodeError as exc:
        raise TaxonomyError(f"taxonomy {path.name}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} "
                            f"at offset {exc.start})") from None
    except OSError as exc:
        raise TaxonomyError(f"taxonomy {path.name}: cannot be read: {exc.strerror or exc}") from None
    return taxonomy_from_dict(data, origin=path.name)


def taxonomy_from_dict(data: Any, origin: str = "<dict>") -> Taxonomy:
    def fail(message: str) -> TaxonomyError:
        return TaxonomyError(f"taxonomy {origin}: {message}")

    if not isinstance(data, dict):
        raise fail("top level must be a mapping")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise fail("'name' must be a non-empty string")
    version = data.get("version", 1)
    if not isinstance(version, int):
        raise fail("'version' must be an integer")
    components_raw = data.get("components")
    if not isinstance(components_raw, dict):
        raise fail("'components' must be a mapping")
    missing = [c for c in COMPONENTS if c not in components_raw]
    extra = [c for c in components_raw if c not in COMPONENTS]
    if missing:
        raise fail(f"missing component(s) {', '.join(missing)}")
    if extra:
        raise fail(f"unknown component(s) {', '.join(map(str, extra))} (expected {', '.join(COMPONENTS)})")

    components: dict[str, Component] = {}
    for comp in COMPONENTS:
        raw = components_raw[comp]
        if not isinstance(raw, dict):
            raise fail(f"component {comp} must be a mapping")
        subs = raw.get("sub_components")
        if not isinstance(subs, dict) or not subs:
            raise fail(f"component {comp}: 'sub_components' must be a non-empty mapping of name: definition")
        seen: set[str] = set()
        for sub, definition in subs.items():
            if not isinstance(sub, str) or not sub.strip():
                raise fail(f"component {comp}: sub-component names must be non-empty strings")
            if not isinstance(definition, str) or not definition.strip():
                raise fail(f"component {comp}: sub-component {sub!r} needs a definition")
            folded = sub.casefold()
            if folded in seen:
                raise fail(f"component {comp}: duplicate sub-component {sub!r}")
            seen.add(folded)
        components[comp] = Component(comp, str(raw.get("description", "")), dict(subs))

    thinking_names = components["THINKING"].names()
    if set(thinking_names) != set(THINKING_LEVELS):
        raise fail(f"THINKING sub-components must be {', '.join(THINKING_LEVELS)}, got {', '.join(thinking_names)}")
    weights_raw = components_raw["THINKING"].get("weights")
    if not isinstance(weights_raw, dict):
        raise fail("THINKING needs 'weights' (Recall 1, Grasping 2, Reasoning 3)")
    weights: dict[str, int] = {}
    for level in THINKING_LEVELS:
        w = weights_raw.get(level)
        if not isinstance(w, int) or isinstance(w, bool) or w <= 0:
            raise fail(f"THINKING weight of {level} must be a positive integer")
        weights[level] = w
    if not weights["Recall"] < weights["Grasping"] < weights["Reasoning"]:
        raise fail("THINKING weights must increase Recall < Grasping < Reasoning")

    limits_raw = data.get("limits", PAPER_LIMITS)
    if not isinstance(limits_raw, dict):
        raise fail("'limits' must be a mapping")
    limits = dict(PAPER_LIMITS)
    for comp, value in limits_raw.items():
        if comp not in COMPONENTS:
            raise fail(f"limits: unknown component {comp!r}")
        if not isinstance(value, int) or value < 1:
            raise fail(f"limits: {comp} must be a positive integer")
        limits[comp] = value
    if limits["THINKING"] != 1:
        raise fail("limits: THINKING must be 1 (only the highest level is tagged)")

    return Taxonomy(
        name=name.strip(),
        version=version,
        description=" ".join(str(data.get("description", "")).split()),
        components=components,
        limits=limits,
        thinking_weights=weights,
    )
