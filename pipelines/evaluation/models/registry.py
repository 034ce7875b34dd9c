"""Build a model adapter from a spec string: ``NAME`` or ``NAME?key=value&key=value``.

| spec | adapter | parameters |
|---|---|---|
| ``random`` | seeded uniform guess | ``seed`` (int, default 0) |
| ``most-frequent-position`` | train prior per number of options | - |
| ``longest-option`` | longest option | - |
| ``embedding`` | sentence-embedding similarity (extra ``embedding``) | ``path`` (model dir, default the bundled all-MiniLM-L6-v2), ``temperature`` (0.05), ``dtype``, ``batch_size``, ``device``, ``threads``, ``workers`` |
| ``clip`` | CLIP zero-shot (extra ``clip``) | ``path`` (required, local weights), ``dtype`` (bf16/fp16/tf32/fp32; default bf16 on CUDA, fp32 on CPU), ``batch_size``, ``device``, ``threads``, ``workers`` |
| ``clip-finetune`` | CLIP trained as in the paper's appendix B.1 (extra ``clip``) | ``path`` (required), ``scheme`` (subject/multi-task/few-shot), ``lr``, ``weight_decay``, ``warmup``, ``batch``, ``max_samples``, ``epochs``, ``k``, ``patience``, ``eval_every``, ``seed``, ``dtype``, ``grad_ckpt``, ``checkpoint_dir``, ``save_every`` + the ``clip`` operational ones (``finetune.py``) |
| ``openai`` | OpenAI-compatible chat | ``base_url`` and ``model`` (required), ``mode`` (llm/vlm, default llm), ``api_key_env`` (OPENAI_API_KEY), ``timeout``, ``max_retries``, ``backoff``, ``max_tokens``, ``workers``, ``cache_dir`` |
| ``linear-probe`` | full-train linear probe on a frozen encoder | ``encoder`` (clip/embedding, required), ``per_subject`` (1/0, default 1), ``seed`` + the encoder's parameters |
| ``few-shot`` | linear probe on k questions per skill | as ``linear-probe`` plus ``k`` (default 16) |

Each adapter module declares its model with ``@register_model`` on a builder (the one place to
add a model: a new module in this package is found when the models are first listed)::

    @register_model("my-model", parameters={"seed"}, extra="clip", needs="transformers")
    def build_my_model(args: ModelArgs) -> MultipleChoiceModel:
        return MyModel(seed=args.number("seed", 0, int), name=args.name)

``extra`` names the ``pip install 'stemforge[EXTRA]'`` that provides the importable module
``needs``: without it the model is skipped with a note instead of failing the build. Listing
models imports only the adapter modules, never torch or transformers (adapters import those
when they run).

The model's ``name`` is the spec with its parameters sorted, leaving out those that do not
change predictions (batch_size, device, threads, workers, timeout, max_retries, backoff,
cache_dir, api_key_env). An unknown adapter or parameter, or a bad value, raises ValueError.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable
from urllib.parse import parse_qsl

from pipelines.plugins import import_package_modules
from pipelines.evaluation.models.base import MultipleChoiceModel

MODELS_PACKAGE = "pipelines.evaluation.models"
OPERATIONAL = {
    "batch_size", "device", "threads", "workers", "timeout", "max_retries", "backoff", "cache_dir", "api_key_env",
}


@dataclass(frozen=True)
class ModelArgs:
    """What a builder gets: the spec's kind and parameters, the model's canonical ``name`` and
    the build's default response cache."""

    kind: str
    params: dict[str, str]
    name: str
    cache_dir: str | Path | None = None

    def number(self, key: str, default, cast=float):
        if key not in self.params:
            return default
        try:
            return cast(self.params[key])
        except ValueError:
            raise ValueError(f"{self.kind}: parameter {key} must be a number, got {self.params[key]!r}") from None

    def required(self, key: str, what: str = "") -> str:
        if not self.params.get(key):
            raise ValueError(f"{self.kind}: parameter {key}{' (' + what + ')' if what else ''} is required")
        return self.params[key]


Builder = Callable[[ModelArgs], MultipleChoiceModel]


@dataclass(frozen=True)
class ModelEntry:
    name: str
    build: Builder
    # the parameters the spec may give, or a function of the given ones returning them
    parameters: frozenset[str] | Callable[[str, dict[str, str]], set[str]]
    extra: str | None = None  # the ``stemforge[EXTRA]`` that provides ``needs``
    needs: str | None = None  # module that must be importable, else the model is skipped
    baseline: bool = False  # a floor that needs nothing but the dataset
    encoder: bool = False  # usable as the frozen encoder of linear-probe / few-shot
    order: tuple[str, int] = ("", 0)  # (module, line): listing order whatever the import order

    def allowed(self, params: dict[str, str]) -> set[str]:
        return set(self.parameters(self.name, params)) if callable(self.parameters) else set(self.parameters)


_MODELS: dict[str, ModelEntry] = {}
_loaded = False


def register_model(name: str, *, parameters: Iterable[str] | Callable = (), extra: str | None = None,
                   needs: str | None = None, baseline: bool = False, encoder: bool = False):
    """Declare the model ``name`` built by the decorated ``builder(args: ModelArgs)``."""

    def decorate(build: Builder) -> Builder:
        existing = _MODELS.get(name)
        if existing is not None and (existing.build.__module__, existing.build.__qualname__) != (
            build.__module__, build.__qualname__
        ):
            raise ValueError(f"model {name!r} is registered twice")
        allowed = parameters if callable(parameters) else frozenset(parameters)
        order = (build.__module__, build.__code__.co_firstlineno)
        _MODELS[name] = ModelEntry(name, build, allowed, extra, needs, baseline, encoder, order)
        return build

    return decorate


def models() -> dict[str, ModelEntry]:
    """Every registered model by name; the adapter modules are imported on the first call."""
    global _loaded
    if not _loaded:
        import_package_modules(MODELS_PACKAGE)
        _loaded = True
    return dict(sorted(_MODELS.items(), key=lambda item: item[1].order))


def model_entry(kind: str) -> ModelEntry | None:
    return models().get(kind)


def model_names() -> list[str]:
    return list(models())


def available_baselines() -> list[str]:
    """The floor baselines that need nothing but the dataset."""
    return [name for name, entry in models().items() if entry.baseline]


def encoder_names() -> list[str]:
    return sorted(name for name, entry in models().items() if entry.encoder)


def parse_spec(spec: str) -> tuple[str, dict[str, str]]:
    spec = (spec or "").strip()
    kind, _, query = spec.partition("?")
    if kind not in models():
        raise ValueError(f"unknown model {kind!r}; expected one of: {', '.join(models())}")
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise ValueError(f"malformed model parameters in {spec!r} (expected key=value&key=value)") from None
    params: dict[str, str] = {}
    for key, value in pairs:
        if key in params:
            raise ValueError(f"model parameter {key!r} given twice in {spec!r}")
        params[key] = value
    return kind, params


def canonical_name(kind: str, params: dict[str, str]) -> str:
    kept = sorted((k, v) for k, v in params.items() if k not in OPERATIONAL)
    return kind + ("?" + "&".join(f"{k}={v}" for k, v in kept) if kept else "")


def check_parameters(kind: str, params: dict[str, str], allowed: set[str]) -> None:
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise ValueError(f"{kind}: unknown parameter {unknown[0]!r}; allowed: {', '.join(sorted(allowed)) or 'none'}")


def build_model(spec: str, cache_dir: str | Path | None = None) -> MultipleChoiceModel:
    """The adapter for ``spec``; ``cache_dir`` is the default response cache (``openai``)."""
    kind, params = parse_spec(spec)
    entry = models()[kind]
    check_parameters(kind, params, entry.allowed(params))
    return entry.build(ModelArgs(kind, params, canonical_name(kind, params), cache_dir))


def model_code_digest(spec: str) -> str | None:
    """A digest of the modules of the builders ``spec`` uses (its own, and its encoder's):
    they are found through the registry, so the imports of the predict stage do not name them."""
    from pipelines.store.code_deps import code_digest_of

    try:
        kind, params = parse_spec(spec)
    except ValueError:
        return None
    entries = [models()[kind]]
    if params.get("encoder") in models():
        entries.append(models()[params["encoder"]])
    return hashlib.sha256("".join(code_digest_of(e.build) for e in entries).encode()).hexdigest()
