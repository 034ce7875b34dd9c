"""CLIP zero-shot, as in the STEM paper and its released evaluation code.

Weights, tokenizer and image processor are read from a LOCAL directory the user gives (a
``save_pretrained`` layout of ``transformers.CLIPModel``); nothing is downloaded.

- Text options: for each option the text encoder reads ``<bos> question option <eos>`` (the
  paper's "Q+A" format) and is compared with the question image. When the sequence would
  exceed the text encoder's context (77 tokens for CLIP), the QUESTION is truncated from its
  end so the option always fits whole (an option longer than the context alone is cut to
  it), as in the released code.
- Image options: each option image is compared with the question text (truncated to the
  context); the question image, if any, is not used (as in the released code).
- A text-only question (no question image, text options) cannot be scored: prediction -1
  with an error, never a guess.
- option_scores are CLIP's logits (logit_scale x cosine); confidence is the softmax over the
  options of those logits.

Speed (``runtime.py``): ``dtype`` bf16 | fp16 | tf32 | fp32 (default bf16 on CUDA, fp32 on
the CPU); tokenizing, decoding and preprocessing run in a torch DataLoader with ``workers``
processes (default 0 on the CPU, up to 16 on CUDA), pinned memory and prefetch; each distinct
picture and each distinct token sequence is encoded once per call (pictures are also cached
across calls), and texts are encoded in batches of similar lengths. Features and logits are
computed from the encoder's output in float64 whatever the dtype. Pictures go through
``clip_pixels.py`` (libspng for PNGs, no float copies in the workers, uint8 pixels normalized
on the device: the processor's very pixels); each worker tokenizes a distinct text once, in
one tokenizer call per item.

torch and transformers are imported on first use only (extra ``clip``); ``threads`` sets
torch's intra-op threads for the process when the model loads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from pipelines.evaluation.models import runtime
from pipelines.evaluation.models.clip_pixels import ClipPixels, normalize, plan_for
from pipelines.evaluation.models.registry import ModelArgs, register_model
from pipelines.evaluation.models.base import (
    EvalQuestion,
    MultipleChoiceModel,
    PairFeatureEncoder,
    PairFeatures,
    Prediction,
    failed_prediction,
    prediction_from_scores,
)

NO_IMAGE_ERROR = "text-only question: no image to compare the options with"
IMAGE_CACHE_ENTRIES = 50_000  # image features kept in memory (oldest dropped first)
QUESTION_CHUNK = 2048  # questions encoded together; bounds the memory of one predict call
DECODE_CHUNK = 16  # pictures one worker decodes at a time (the model's batches gather several)


def _content_ids(tokenizer, text: str) -> list[int]:
    return TokenIds(tokenizer)(text)


class TokenIds:
    """Text -> its token ids without bos/eos, each distinct text tokenized once (``prefill``
    tokenizes many in one call of the tokenizer)."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.special = {tokenizer.bos_token_id, tokenizer.eos_token_id}
        self.known: dict[str, list[int]] = {}

    def prefill(self, texts) -> None:
        missing = list(dict.fromkeys(t for t in texts if t not in self.known))
        if missing:
            for text, ids in zip(missing, self.tokenizer(missing, add_special_tokens=False)["input_ids"]):
                self.known[text] = [int(i) for i in ids if i not in self.special]

    def __call__(self, text: str) -> list[int]:
        if text not in self.known:
            self.prefill([text])
        return self.known[text]


def token_sequences(tokenizer, context: int, question: EvalQuestion, ids: TokenIds | None = None) -> list[list[int]]:
    """The token sequences the text encoder reads for this question (one per option for
    text options, one for image options), each at most ``context`` tokens."""
    ids = ids or TokenIds(tokenizer)
    limit = context - 2
    bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
    question_ids = ids(question.problem)
    if question.choices is None:
        return [[bos, *question_ids[:limit], eos]]
    sequences = []
    for option in question.choices:
        option_ids = ids(option)[:limit]
        keep = min(len(question_ids), limit - len(option_ids))
        sequences.append([bos, *question_ids[:keep], *option_ids, eos])
    return sequences


class DecodeImages:
    """Image paths -> (paths read, pixel tensor or None, {path: error}): the processor's
    pixels (float32), or with ``as_uint8`` uint8 pixels that ``clip_pixels.normalize`` finishes
    (on the device) where the fast path applies (``clip_pixels.py``)."""

    def __init__(self, image_processor, as_uint8: bool = False):
        self.pixels = ClipPixels(image_processor)
        self.as_uint8 = as_uint8

    def __call__(self, paths):
        import torch

        loaded, pixels, errors = self.pixels(paths, as_uint8=self.as_uint8)
        return loaded, (torch.from_numpy(pixels) if pixels is not None else None), errors


class Prepare:
    """DataLoader collate (runs in a worker): ``("text", questions)`` -> ``("text", token
    sequences per question)``; ``("image", paths)`` -> ``("image", paths read, pixels, errors)``
    (uint8 pixels where the fast path applies). Each distinct text is tokenized once per worker."""

    def __init__(self, tokenizer, context: int, image_processor):
        self.tokenizer, self.context = tokenizer, context
        self.ids = TokenIds(tokenizer)
        self.decode = DecodeImages(image_processor, as_uint8=True)

    def __call__(self, item):
        kind, payload = item
        if kind == "text":
            self.ids.prefill(t for q in payload for t in (q.problem, *(q.choices or ())))
            return "text", [token_sequences(self.tokenizer, self.context, q, self.ids) for q in payload]
        return ("image", *self.decode(payload))


def input_loader(answerable: Sequence[EvalQuestion], todo: Sequence[str], workers: int, device: str,
                 tokenizer, context: int, image_processor):
    """(text items, DataLoader): the adapter's input pipeline. One loader: its workers tokenize
    the questions first (items ``("text", questions)``), then decode pictures (``("image",
    paths)``, DECODE_CHUNK at a time) while the text encoder runs."""
    per_text = min(512, max(16, len(answerable) // max(1, 2 * workers)))
    text_items = [("text", answerable[i : i + per_text]) for i in range(0, len(answerable), per_text)]
    image_items = [("image", todo[i : i + DECODE_CHUNK]) for i in range(0, len(todo), DECODE_CHUNK)]
    return text_items, runtime.data_loader(text_items + image_items, workers, device,
                                           Prepare(tokenizer, context, image_processor))


def pad_batch(sequences: list[list[int]], pad: int):
    """(input_ids, attention_mask) padded to the longest sequence of the batch."""
    import torch

    length = max(len(seq) for seq in sequences)
    input_ids = torch.full((len(sequences), length), pad, dtype=torch.long)
    attention = torch.zeros((len(sequences), length), dtype=torch.long)
    for i, seq in enumerate(sequences):
        input_ids[i, : len(seq)] = torch.tensor(seq, dtype=torch.long)
        attention[i, : len(seq)] = 1
    return input_ids, attention


class ClipZeroShotModel(MultipleChoiceModel, PairFeatureEncoder):
    def __init__(
        self,
        path: str | Path,
        batch_size: int = 32,
        device: str = "cpu",
        name: str | None = None,
        threads: int | None = None,
        dtype: str | None = None,
        workers: int | None = None,
    ):
        self.path = Path(path).expanduser()
        self.batch_size = max(1, int(batch_size))
        self.device = device
        self.name = name or f"clip?path={path}"
        self.threads = threads
        self.dtype = runtime.resolve_dtype(dtype, device)
        self.workers = runtime.resolve_workers(workers, device)
        self._model = None
        self._tokenizer = None
        self._image_processor = None
        self._image_cache: dict[str, np.ndarray] = {}

    # -- loading -------------------------------------------------------------------------
    def _load(self):
        if self._model is not None:
            return
        if not self.path.is_dir():
            raise ValueError(f"CLIP weights directory not found: {self.path}")
        try:
            import torch
            from transformers import AutoImageProcessor, AutoTokenizer, CLIPModel
        except ImportError:
            raise ValueError("the CLIP adapter needs the 'clip' extra (torch, transformers)") from None
        if self.threads:
            torch.set_num_threads(int(self.threads))
        try:
            model = CLIPModel.from_pretrained(str(self.path), local_files_only=True)
            tokenizer = AutoTokenizer.from_pretrained(str(self.path), local_files_only=True)
            image_processor = AutoImageProcessor.from_pretrained(str(self.path), local_files_only=True)
        except Exception as exc:  # transformers raises many types for a bad directory
            message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ValueError(f"cannot load CLIP from {self.path}: {message}") from None
        self._model, self._tokenizer, self._image_processor = model, tokenizer, image_processor
        self.use_model(model)

    def use_model(self, model) -> None:
        """Run ``model`` (a ``CLIPModel``, e.g. fine-tuned weights) at this adapter's device
        and dtype; the image features cached so far are dropped."""
        if self._tokenizer is None:
            self._load()
        runtime.apply_matmul_precision(self.dtype, self.device)
        model.to(device=self.device, dtype=runtime.torch_dtype(self.dtype))
        model.eval()
        self._model = model
        self._image_cache.clear()

    @property
    def context_length(self) -> int:
        self._load()
        return int(self._model.config.text_config.max_position_embeddings)

    # -- text ----------------------------------------------------------------------------
    def _content_ids(self, text: str) -> list[int]:
        return _content_ids(self._tokenizer, text)

    def text_token_ids(self, question: EvalQuestion) -> list[list[int]]:
        """The token sequences the text encoder reads for this question (one per option for
        text options, one for image options), each at most the context length."""
        self._load()
        return token_sequences(self._tokenizer, self.context_length, question)

    def _text_features(self, sequences: list[list[int]]) -> np.ndarray:
        """Unit text features, one row per sequence; each distinct sequence is encoded once,
        in batches of similar lengths (little padding)."""
        import torch

        pad = self._tokenizer.pad_token_id
        if pad is None:
            pad = self._tokenizer.eos_token_id
        distinct: dict[tuple[int, ...], int] = {}
        rows_of = [distinct.setdefault(tuple(seq), len(distinct)) for seq in sequences]
        unique = list(distinct)
        order = sorted(range(len(unique)), key=lambda i: (len(unique[i]), i))
        features: np.ndarray | None = None
        for start in range(0, len(order), self.batch_size):
            picked = order[start : start + self.batch_size]
            # Padding to the batch's longest sequence instead of the full context changes
            # nothing (causal attention, features pooled at the end token) and is faster.
            input_ids, attention = pad_batch([list(unique[i]) for i in picked], pad)
            with torch.inference_mode():
                out = self._model.get_text_features(
                    input_ids=runtime.to_device(input_ids, self.device),
                    attention_mask=runtime.to_device(attention, self.device),
                )
            pooled = _pooled(out)
            if features is None:
                features = np.zeros((len(unique), pooled.shape[1]))
            features[picked] = pooled
        return _unit(features[rows_of])

    # -- images --------------------------------------------------------------------------
    def _image_features(self, batches) -> dict[str, np.ndarray | str]:
        """Unit image features by path from ``(paths read, pixels, errors)`` chunks, encoded
        ``batch_size`` pictures at a time and cached, or a one-line error for an unreadable image."""
        import torch

        found: dict[str, np.ndarray | str] = {}
        plan = plan_for(self._image_processor)
        pending_paths: list[str] = []
        pending: list = []

        def encode():
            pixels = torch.cat(pending) if len(pending) > 1 else pending[0]
            with torch.inference_mode():
                out = self._model.get_image_features(pixel_values=pixels)
            for path, vector in zip(pending_paths, _unit(_pooled(out))):
                if len(self._image_cache) >= IMAGE_CACHE_ENTRIES:
                    self._image_cache.pop(next(iter(self._image_cache)))
                self._image_cache[path] = found[path] = vector
            pending.clear()
            pending_paths.clear()

        for loaded, pixels, errors in batches:
            found.update(errors)
            if pixels is None:
                continue
            # uint8 pixels travel (a quarter of float32's bytes) and are normalized on the device
            pending.append(normalize(runtime.to_device(pixels, self.device), plan, runtime.torch_dtype(self.dtype)))
            pending_paths.extend(loaded)
            if len(pending_paths) >= self.batch_size:
                encode()
        if pending:
            encode()
        return found

    # -- scoring -------------------------------------------------------------------------
    def _pairs(self, questions: Sequence[EvalQuestion]) -> list[tuple[np.ndarray, np.ndarray] | str]:
        """Per question: (text features, image features), one row per option; or an error."""
        self._load()
        plans: list[tuple[int, int, list[Path]] | str] = []
        sequences: list[list[int]] = []
        for question in questions:
            if question.choice_images is not None:
                images = list(question.choice_images)
            elif question.problem_image is not None:
                images = [question.problem_image]
            else:
                plans.append(NO_IMAGE_ERROR)
                continue
            plans.append((0, 0, images))
        answerable = [q for q, plan in zip(questions, plans) if not isinstance(plan, str)]
        wanted = sorted({str(p) for plan in plans if not isinstance(plan, str) for p in plan[2]})
        by_path: dict[str, np.ndarray | str] = {k: self._image_cache[k] for k in wanted if k in self._image_cache}
        todo = [k for k in wanted if k not in by_path]
        text_items, loader = input_loader(answerable, todo, self.workers, self.device, self._tokenizer,
                                          self.context_length, self._image_processor)
        prepared = iter(loader)
        tokenized = iter([seqs for _ in text_items for seqs in next(prepared)[1]])
        for i, plan in enumerate(plans):
            if not isinstance(plan, str):
                start = len(sequences)
                sequences.extend(next(tokenized))
                plans[i] = (start, len(sequences), plan[2])
        text = self._text_features(sequences) if sequences else np.zeros((0, 0))
        by_path.update(self._image_features(item[1:] for item in prepared))
        result: list[tuple[np.ndarray, np.ndarray] | str] = []
        for question, plan in zip(questions, plans):
            if isinstance(plan, str):
                result.append(plan)
                continue
            start, end, images = plan
            errors = [by_path[str(p)] for p in images if isinstance(by_path[str(p)], str)]
            if errors:
                result.append(errors[0])
                continue
            image_rows = np.stack([by_path[str(p)] for p in images])
            text_rows = text[start:end]
            k = question.num_options
            if len(text_rows) == 1:
                text_rows = np.repeat(text_rows, k, axis=0)
            if len(image_rows) == 1:
                image_rows = np.repeat(image_rows, k, axis=0)
            result.append((text_rows, image_rows))
        return result

    def logit_scale(self) -> float:
        self._load()
        return float(self._model.logit_scale.float().exp().item())

    def _chunked_pairs(self, questions: Sequence[EvalQuestion]):
        """(question, pair) in order, computed QUESTION_CHUNK questions at a time to bound memory."""
        for start in range(0, len(questions), QUESTION_CHUNK):
            chunk = questions[start : start + QUESTION_CHUNK]
            yield from zip(chunk, self._pairs(chunk))

    def predict(self, questions: Sequence[EvalQuestion]) -> list[Prediction]:
        scale = self.logit_scale()
        predictions = []
        for question, pair in self._chunked_pairs(questions):
            if isinstance(pair, str):
                predictions.append(failed_prediction(question.question_id, pair))
                continue
            text_rows, image_rows = pair
            logits = scale * np.sum(text_rows * image_rows, axis=1)
            predictions.append(prediction_from_scores(question.question_id, logits))
        return predictions

    def pair_features(self, questions: Sequence[EvalQuestion]) -> list[PairFeatures]:
        features = []
        for _, pair in self._chunked_pairs(questions):
            if isinstance(pair, str):
                features.append(PairFeatures(None, pair))
            else:
                text_rows, image_rows = pair
                features.append(PairFeatures((text_rows * image_rows).astype(np.float32)))
        return features


def _pooled(output) -> np.ndarray:
    """transformers 5 returns a model output whose pooler_output holds the projected features."""
    tensor = getattr(output, "pooler_output", output)
    return tensor.detach().float().to("cpu").double().numpy()


def _unit(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)


@register_model("clip", parameters={"path", "batch_size", "device", "threads", "dtype", "workers"},
                extra="clip", needs="transformers", encoder=True)
def build_clip(args: ModelArgs) -> ClipZeroShotModel:
    return ClipZeroShotModel(
        path=Path(args.required("path", "a local CLIP weights directory")),
        batch_size=args.number("batch_size", 32, int),
        device=args.params.get("device", "cpu"),
        threads=args.number("threads", None, int),
        dtype=args.params.get("dtype") or None,
        workers=args.number("workers", None, int),
        name=args.name,
    )
