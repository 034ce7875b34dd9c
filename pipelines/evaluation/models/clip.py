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

torch and transformers are imported on first use only (extra ``clip``); ``threads`` sets
torch's intra-op threads for the process when the model loads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

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
QUESTION_CHUNK = 256  # questions encoded together; bounds the memory of one predict call


class ClipZeroShotModel(MultipleChoiceModel, PairFeatureEncoder):
    def __init__(
        self,
        path: str | Path,
        batch_size: int = 32,
        device: str = "cpu",
        name: str | None = None,
        threads: int | None = None,
    ):
        self.path = Path(path).expanduser()
        self.batch_size = max(1, int(batch_size))
        self.device = device
        self.name = name or f"clip?path={path}"
        self.threads = threads
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
        model.to(self.device)
        model.eval()
        self._model, self._tokenizer, self._image_processor = model, tokenizer, image_processor

    @property
    def context_length(self) -> int:
        self._load()
        return int(self._model.config.text_config.max_position_embeddings)

    # -- text ----------------------------------------------------------------------------
    def _content_ids(self, text: str) -> list[int]:
        tokenizer = self._tokenizer
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        special = {tokenizer.bos_token_id, tokenizer.eos_token_id}
        return [int(i) for i in ids if i not in special]

    def text_token_ids(self, question: EvalQuestion) -> list[list[int]]:
        """The token sequences the text encoder reads for this question (one per option for
        text options, one for image options), each at most the context length."""
        self._load()
        limit = self.context_length - 2
        bos, eos = self._tokenizer.bos_token_id, self._tokenizer.eos_token_id
        question_ids = self._content_ids(question.problem)
        if question.choices is None:
            return [[bos, *question_ids[:limit], eos]]
        sequences = []
        for option in question.choices:
            option_ids = self._content_ids(option)[:limit]
            keep = min(len(question_ids), limit - len(option_ids))
            sequences.append([bos, *question_ids[:keep], *option_ids, eos])
        return sequences

    def _text_features(self, sequences: list[list[int]]) -> np.ndarray:
        import torch

        pad = self._tokenizer.pad_token_id
        if pad is None:
            pad = self._tokenizer.eos_token_id
        rows = []
        for start in range(0, len(sequences), self.batch_size):
            batch = sequences[start : start + self.batch_size]
            # Padding to the batch's longest sequence instead of the full context changes
            # nothing (causal attention, features pooled at the end token) and is faster.
            length = max(len(seq) for seq in batch)
            input_ids = torch.full((len(batch), length), pad, dtype=torch.long)
            attention = torch.zeros((len(batch), length), dtype=torch.long)
            for i, seq in enumerate(batch):
                input_ids[i, : len(seq)] = torch.tensor(seq, dtype=torch.long)
                attention[i, : len(seq)] = 1
            with torch.inference_mode():
                out = self._model.get_text_features(
                    input_ids=input_ids.to(self.device), attention_mask=attention.to(self.device)
                )
            rows.append(_pooled(out))
        return _unit(np.concatenate(rows, axis=0))

    # -- images --------------------------------------------------------------------------
    def _image_features(self, paths: list[Path]) -> dict[str, np.ndarray | str]:
        """Unit image features by path (batched, cached), or a one-line error for an unreadable image."""
        import torch
        from PIL import Image

        found: dict[str, np.ndarray | str] = {}
        todo = []
        for key in sorted({str(p) for p in paths}):
            if key in self._image_cache:
                found[key] = self._image_cache[key]
            else:
                todo.append(key)
        for start in range(0, len(todo), self.batch_size):
            loaded, images = [], []
            for path in todo[start : start + self.batch_size]:
                try:
                    with Image.open(path) as im:
                        images.append(im.convert("RGB"))
                    loaded.append(path)
                except Exception as exc:  # Pillow raises many types for a bad file
                    found[path] = f"unreadable image {path}: {type(exc).__name__}"
            if not images:
                continue
            pixels = self._image_processor(images=images, return_tensors="pt")["pixel_values"]
            with torch.inference_mode():
                out = self._model.get_image_features(pixel_values=pixels.to(self.device))
            for path, vector in zip(loaded, _unit(_pooled(out))):
                if len(self._image_cache) >= IMAGE_CACHE_ENTRIES:
                    self._image_cache.pop(next(iter(self._image_cache)))
                self._image_cache[path] = found[path] = vector
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
            start = len(sequences)
            sequences.extend(self.text_token_ids(question))
            plans.append((start, len(sequences), images))
        text = self._text_features(sequences) if sequences else np.zeros((0, 0))
        by_path = self._image_features([p for plan in plans if not isinstance(plan, str) for p in plan[2]])
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
        return float(self._model.logit_scale.exp().item())

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
    return tensor.detach().to("cpu").double().numpy()


def _unit(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)


@register_model("clip", parameters={"path", "batch_size", "device", "threads"},
                extra="clip", needs="transformers", encoder=True)
def build_clip(args: ModelArgs) -> ClipZeroShotModel:
    return ClipZeroShotModel(
        path=Path(args.required("path", "a local CLIP weights directory")),
        batch_size=args.number("batch_size", 32, int),
        device=args.params.get("device", "cpu"),
        threads=args.number("threads", None, int),
        name=args.name,
    )
