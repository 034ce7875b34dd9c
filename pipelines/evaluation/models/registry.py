"""Build a model adapter from a spec string: ``NAME`` or ``NAME?key=value&key=value``.

| spec | adapter | parameters |
|---|---|---|
| ``random`` | seeded uniform guess | ``seed`` (int, default 0) |
| ``most-frequent-position`` | train prior per number of options | - |
| ``longest-option`` | longest option | - |
| ``embedding`` | sentence-embedding similarity (extra ``embedding``) | ``path`` (model dir, default the bundled all-MiniLM-L6-v2), ``temperature`` (0.05), ``batch_size``, ``device``, ``threads`` |
| ``clip`` | CLIP zero-shot (extra ``clip``) | ``path`` (required, local weights), ``batch_size``, ``device``, ``threads`` |
| ``openai`` | OpenAI-compatible chat | ``base_url`` and ``model`` (required), ``mode`` (llm/vlm, default llm), ``api_key_env`` (OPENAI_API_KEY), ``timeout``, ``max_retries``, ``backoff``, ``max_tokens``, ``workers``, ``cache_dir`` |
| ``linear-probe`` | full-train linear probe on a frozen encoder | ``encoder`` (clip/embedding, required), ``per_subject`` (1/0, default 1), ``seed`` + the encoder's parameters |
| ``few-shot`` | linear probe on k questions per skill | as ``linear-probe`` plus ``k`` (default 16) |

The model's ``name`` is the spec with its parameters sorted, leaving out those that do not
change predictions (batch_size, device, threads, workers, timeout, max_retries, backoff,
cache_dir, api_key_env). An unknown adapter or parameter, or a bad value, raises ValueError.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qsl

from pipelines.evaluation.models.base import MultipleChoiceModel

BASELINES = ("random", "most-frequent-position", "longest-option")
ADAPTERS = BASELINES + ("embedding", "clip", "openai", "linear-probe", "few-shot")
OPERATIONAL = {
    "batch_size", "device", "threads", "workers", "timeout", "max_retries", "backoff", "cache_dir", "api_key_env",
}

_PARAMETERS = {
    "random": {"seed"},
    "most-frequent-position": set(),
    "longest-option": set(),
    "embedding": {"path", "temperature", "batch_size", "device", "threads"},
    "clip": {"path", "batch_size", "device", "threads"},
    "openai": {"base_url", "model", "mode", "api_key_env", "timeout", "max_retries", "backoff",
               "max_tokens", "workers", "cache_dir"},
}
_PROBE_PARAMETERS = {"encoder", "per_subject", "seed"}


def available_baselines() -> list[str]:
    """The floor baselines that need nothing but the dataset."""
    return list(BASELINES)


def available_adapters() -> list[str]:
    return list(ADAPTERS)


def parse_spec(spec: str) -> tuple[str, dict[str, str]]:
    spec = (spec or "").strip()
    kind, _, query = spec.partition("?")
    if kind not in ADAPTERS:
        raise ValueError(f"unknown model {kind!r}; expected one of: {', '.join(ADAPTERS)}")
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


def _number(params, key, kind, default, cast=float):
    if key not in params:
        return default
    try:
        return cast(params[key])
    except ValueError:
        raise ValueError(f"{kind}: parameter {key} must be a number, got {params[key]!r}") from None


def _check(kind: str, params: dict[str, str], allowed: set[str]) -> None:
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise ValueError(f"{kind}: unknown parameter {unknown[0]!r}; allowed: {', '.join(sorted(allowed)) or 'none'}")


def _encoder(kind: str, params: dict[str, str], name: str):
    if kind == "embedding":
        from pipelines.evaluation.models.embedding import DEFAULT_TEMPERATURE, EmbeddingSimilarityModel

        return EmbeddingSimilarityModel(
            model_path=params.get("path") or None,
            temperature=_number(params, "temperature", kind, DEFAULT_TEMPERATURE),
            batch_size=_number(params, "batch_size", kind, 64, int),
            device=params.get("device", "cpu"),
            threads=_number(params, "threads", kind, None, int),
            name=name,
        )
    if kind == "clip":
        from pipelines.evaluation.models.clip import ClipZeroShotModel

        if not params.get("path"):
            raise ValueError("clip: parameter path (a local CLIP weights directory) is required")
        return ClipZeroShotModel(
            path=Path(params["path"]),
            batch_size=_number(params, "batch_size", kind, 32, int),
            device=params.get("device", "cpu"),
            threads=_number(params, "threads", kind, None, int),
            name=name,
        )
    raise ValueError(f"unknown encoder {kind!r}; expected clip or embedding")


def build_model(spec: str, cache_dir: str | Path | None = None) -> MultipleChoiceModel:
    """The adapter for ``spec``; ``cache_dir`` is the default response cache for ``openai``."""
    kind, params = parse_spec(spec)
    name = canonical_name(kind, params)
    if kind in ("linear-probe", "few-shot"):
        from pipelines.evaluation.models.training import LinearProbeModel

        encoder_kind = params.get("encoder")
        if encoder_kind not in ("clip", "embedding"):
            raise ValueError(f"{kind}: parameter encoder must be clip or embedding, got {encoder_kind!r}")
        allowed = _PROBE_PARAMETERS | _PARAMETERS[encoder_kind] | ({"k"} if kind == "few-shot" else set())
        _check(kind, params, allowed)
        encoder_params = {k: v for k, v in params.items() if k in _PARAMETERS[encoder_kind]}
        encoder = _encoder(encoder_kind, encoder_params, canonical_name(encoder_kind, encoder_params))
        shots = _number(params, "k", kind, 16, int) if kind == "few-shot" else None
        if shots is not None and shots < 1:
            raise ValueError(f"few-shot: k must be at least 1, got {shots}")
        per_subject = params.get("per_subject", "1")
        if per_subject not in ("0", "1"):
            raise ValueError(f"{kind}: per_subject must be 0 or 1, got {per_subject!r}")
        return LinearProbeModel(
            encoder,
            shots_per_skill=shots,
            per_subject=per_subject == "1",
            seed=_number(params, "seed", kind, 0, int),
            name=name,
        )
    _check(kind, params, _PARAMETERS[kind])
    if kind == "random":
        from pipelines.evaluation.models.baselines import RandomBaseline

        model = RandomBaseline(seed=_number(params, "seed", kind, 0, int))
        model.name = name
        return model
    if kind == "most-frequent-position":
        from pipelines.evaluation.models.baselines import MostFrequentPositionBaseline

        return MostFrequentPositionBaseline()
    if kind == "longest-option":
        from pipelines.evaluation.models.baselines import LongestOptionBaseline

        return LongestOptionBaseline()
    if kind in ("embedding", "clip"):
        return _encoder(kind, params, name)
    from pipelines.evaluation.models.openai_chat import OpenAIChatModel

    for required in ("base_url", "model"):
        if not params.get(required):
            raise ValueError(f"openai: parameter {required} is required")
    return OpenAIChatModel(
        base_url=params["base_url"],
        model=params["model"],
        mode=params.get("mode", "llm"),
        api_key_env=params.get("api_key_env", "OPENAI_API_KEY"),
        cache_dir=params.get("cache_dir") or cache_dir,
        timeout=_number(params, "timeout", kind, 60.0),
        max_retries=_number(params, "max_retries", kind, 3, int),
        backoff=_number(params, "backoff", kind, 1.0),
        max_tokens=_number(params, "max_tokens", kind, 16, int),
        workers=_number(params, "workers", kind, 4, int),
        name=name,
    )
