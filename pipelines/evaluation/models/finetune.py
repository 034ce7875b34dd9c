"""The paper's CLIP training schemes (Table 4), as its appendix B.1 gives them.

``clip-finetune?path=DIR&scheme=subject|multi-task|few-shot``:

- model: the CLIP at ``path`` (the paper: ViT-L/14@336px), every weight trained;
- loss: a question's loss is the cross-entropy over its options' logits, the logits being
  those of the zero-shot test (``logit_scale x cosine`` of "question + option" text and
  question image, or of option image and question text); questions without a picture or
  without a known answer are left out of training;
- optimizer: AdamW, learning rate ``lr`` 1e-5, weight decay ``weight_decay`` 0.2 (on
  matrices; biases, norms and the logit scale are not decayed), linear warm-up over
  ``warmup`` 10% of the steps, then cosine decay to 0;
- ``scheme=subject`` (the paper's "finetuning"): one model per subject, batch 128, at most
  ``max_samples`` 100k training samples (questions seen, repeats included) per subject;
  ``scheme=multi-task``: one model for all subjects, batch 128, at most 200k samples;
  ``scheme=few-shot``: one model per subject trained on ``k`` 16 questions per skill
  (``training.few_shot_sample``), batch 16, 10 epochs;
- early stopping on valid: accuracy on the group's valid questions after every
  ``eval_every`` steps (default one epoch) and at the end; training stops after
  ``patience`` (3) evaluations without a better accuracy, and the weights of the best
  evaluation (the earliest on ties) are the ones that predict;
- on CUDA bf16 autocast and gradient checkpointing are on by default (``dtype``,
  ``grad_ckpt=0|1``); predictions then run as the ``clip`` adapter does (``dtype`` again);
- checkpoints: under ``checkpoint_dir`` (default ``<data home>/cache/finetune``), one
  folder per (settings, group, training questions) holds ``last.pt`` (weights, optimizer,
  scheduler, step, valid curve; written every ``save_every`` steps and at each evaluation),
  ``best.pt`` and, once done, ``run.json`` (settings, curve, best step). A run killed and
  started again resumes from ``last.pt`` and ends with the same weights as an uninterrupted
  one (the data order is a function of seed and epoch); a finished group is not retrained.
- more than one GPU: launch ``python -m pipelines.evaluation.models.finetune SPEC --home DIR``
  under ``torchrun --nproc_per_node N`` (or ``accelerate launch``, which sets the same
  environment): each process takes its share of every batch, DistributedDataParallel
  averages the gradients, rank 0 writes the checkpoints; the build's predict stage then
  finds the finished checkpoints and only predicts.

The model's name is its spec with every training setting written out, so each prediction
row says which settings made it; ``selection`` (per group: curve, best step, counts) is
also written to ``run.json``. torch and transformers are imported on first use only.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from pipelines.evaluation.models.base import EvalQuestion, MultipleChoiceModel, Prediction, failed_prediction
from pipelines.evaluation.models.registry import ModelArgs, canonical_name, register_model
from pipelines.evaluation.models.runtime import data_loader, is_cuda, resolve_dtype, resolve_workers, to_device
from pipelines.evaluation.models.training import few_shot_sample

SCHEMES = ("subject", "multi-task", "few-shot")
ALL_SUBJECTS = "all"
IGNORE = -100
MASKED = -1e4  # logit of a padded option slot


@dataclass(frozen=True)
class TrainSettings:
    scheme: str = "subject"
    lr: float = 1e-5
    weight_decay: float = 0.2
    warmup: float = 0.1
    batch: int = 128
    max_samples: int | None = 100_000
    epochs: int | None = None
    shots: int = 16
    patience: int = 3
    eval_every: int | None = None  # steps; default one epoch
    seed: int = 0

    @classmethod
    def for_scheme(cls, scheme: str, **given) -> "TrainSettings":
        if scheme not in SCHEMES:
            raise ValueError(f"clip-finetune: scheme must be one of {', '.join(SCHEMES)}, got {scheme!r}")
        defaults = {
            "subject": dict(batch=128, max_samples=100_000, epochs=None),
            "multi-task": dict(batch=128, max_samples=200_000, epochs=None),
            "few-shot": dict(batch=16, max_samples=None, epochs=10),
        }[scheme]
        values = {**defaults, **{k: v for k, v in given.items() if v is not None}}
        settings = cls(scheme=scheme, **values)
        if settings.batch < 1 or settings.lr <= 0 or settings.patience < 1 or not 0 <= settings.warmup < 1:
            raise ValueError("clip-finetune: batch and patience must be >= 1, lr > 0, 0 <= warmup < 1")
        if settings.max_samples is None and settings.epochs is None:
            raise ValueError("clip-finetune: give max_samples or epochs")
        return settings

    def spec_params(self) -> dict[str, str]:
        params = {
            "scheme": self.scheme, "lr": f"{self.lr:g}", "weight_decay": f"{self.weight_decay:g}",
            "warmup": f"{self.warmup:g}", "batch": str(self.batch), "patience": str(self.patience),
            "seed": str(self.seed),
        }
        if self.max_samples is not None:
            params["max_samples"] = str(self.max_samples)
        if self.epochs is not None:
            params["epochs"] = str(self.epochs)
        if self.scheme == "few-shot":
            params["k"] = str(self.shots)
        if self.eval_every is not None:
            params["eval_every"] = str(self.eval_every)
        return params


def plan_steps(settings: TrainSettings, n_train: int) -> tuple[int, int]:
    """(steps per epoch, total steps) for ``n_train`` questions."""
    per_epoch = math.ceil(n_train / settings.batch)
    limits = []
    if settings.epochs is not None:
        limits.append(settings.epochs * per_epoch)
    if settings.max_samples is not None:
        limits.append(max(1, settings.max_samples // settings.batch))
    return per_epoch, max(1, min(limits))


def batch_indices(settings: TrainSettings, n_train: int, step: int) -> list[int]:
    """The training questions of ``step``: epoch ``e`` is a permutation seeded by (seed, e)."""
    import torch

    per_epoch = math.ceil(n_train / settings.batch)
    epoch, position = divmod(step, per_epoch)
    generator = torch.Generator().manual_seed(settings.seed * 1_000_003 + epoch)
    order = torch.randperm(n_train, generator=generator).tolist()
    return order[position * settings.batch : (position + 1) * settings.batch]


def lr_factor(step: int, total: int, warmup: float) -> float:
    """Linear warm-up over ``warmup`` of the steps, then cosine decay to 0."""
    warm = int(round(total * warmup))
    if step < warm:
        return (step + 1) / warm
    progress = (step - warm) / max(1, total - warm)
    return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


class EarlyStopping:
    """Best score so far (the earliest on ties) and evaluations since it improved."""

    def __init__(self, patience: int, best: float = -math.inf, best_step: int = -1, bad: int = 0):
        self.patience, self.best, self.best_step, self.bad = patience, best, best_step, bad

    def update(self, score: float, step: int) -> bool:
        """Record ``score`` at ``step``; True when it is the new best."""
        if score > self.best:
            self.best, self.best_step, self.bad = score, step, 0
            return True
        self.bad += 1
        return False

    @property
    def stop(self) -> bool:
        return self.bad >= self.patience


class QuestionBatch:
    """Dataset of whole batches (built in DataLoader workers): pixels of the batch's distinct
    pictures, its padded token sequences, and per question the text row and picture row of
    each option, padded with -1 to the most options, and the answer (``IGNORE`` when the
    question cannot be used: an unreadable picture)."""

    def __init__(self, questions, batches, tokenizer, context, image_processor):
        self.questions, self.batches = questions, batches
        self.tokenizer, self.context, self.image_processor = tokenizer, context, image_processor

    def __len__(self):
        return len(self.batches)

    def __getitem__(self, index):
        import torch

        from pipelines.evaluation.models.clip import DecodeImages, pad_batch, token_sequences

        chosen = [self.questions[i] for i in self.batches[index]]
        paths = sorted({str(p) for q in chosen for p in _pictures(q)})
        loaded, pixels, errors = DecodeImages(self.image_processor)(paths)
        picture_row = {path: i for i, path in enumerate(loaded)}
        sequences: list[list[int]] = []
        width = max(q.num_options for q in chosen)
        text_idx = torch.full((len(chosen), width), -1, dtype=torch.long)
        image_idx = torch.full((len(chosen), width), -1, dtype=torch.long)
        answers = torch.full((len(chosen),), IGNORE, dtype=torch.long)
        for row, question in enumerate(chosen):
            pictures = [str(p) for p in _pictures(question)]
            if any(p in errors for p in pictures):
                continue
            start = len(sequences)
            sequences.extend(token_sequences(self.tokenizer, self.context, question))
            k = question.num_options
            texts = list(range(start, len(sequences)))
            rows = [picture_row[p] for p in pictures]
            text_idx[row, :k] = torch.tensor(texts * k if len(texts) == 1 else texts)
            image_idx[row, :k] = torch.tensor(rows * k if len(rows) == 1 else rows)
            answers[row] = question.answer_idx
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        input_ids, attention = pad_batch(sequences or [[pad]], pad)
        if pixels is None:
            pixels = torch.zeros((0, 3, 1, 1))
        return {"pixel_values": pixels, "input_ids": input_ids, "attention_mask": attention,
                "text_idx": text_idx, "image_idx": image_idx, "answers": answers}


def _pictures(question: EvalQuestion) -> list[Path]:
    if question.choice_images is not None:
        return list(question.choice_images)
    return [question.problem_image] if question.problem_image is not None else []


def usable(question: EvalQuestion) -> bool:
    return bool(_pictures(question)) and 0 <= question.answer_idx < question.num_options


def option_logits(model, batch, device: str):
    """[questions, options] float32 logits (padded slots ``MASKED``), as at test time."""
    import torch

    module = model
    if batch["pixel_values"].shape[0] == 0:
        return torch.full(batch["answers"].shape + (batch["text_idx"].shape[1],), MASKED, device=device)
    images = _features(module.get_image_features(pixel_values=to_device(batch["pixel_values"], device)))
    texts = _features(module.get_text_features(input_ids=to_device(batch["input_ids"], device),
                                               attention_mask=to_device(batch["attention_mask"], device)))
    text_idx, image_idx = to_device(batch["text_idx"], device), to_device(batch["image_idx"], device)
    valid = text_idx >= 0
    cosine = (texts[text_idx.clamp(min=0)] * images[image_idx.clamp(min=0)]).sum(-1)
    logits = module.logit_scale.float().exp() * cosine
    return logits.masked_fill(~valid, MASKED)


def logits_module(model, device: str):
    """``model`` wrapped so that its forward pass gives the option logits (what
    DistributedDataParallel wraps: its gradient hooks need the forward to go through it)."""
    import torch

    class OptionLogits(torch.nn.Module):
        def __init__(self, clip):
            super().__init__()
            self.clip = clip

        def forward(self, batch):
            return option_logits(self.clip, batch, device)

    return OptionLogits(model)


def _features(output):
    import torch

    tensor = getattr(output, "pooler_output", output).float()
    return torch.nn.functional.normalize(tensor, dim=-1)


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:16]


def _save(payload, path: Path) -> None:
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    torch.save(payload, tmp)
    os.replace(tmp, path)


def _distributed() -> tuple[int, int]:
    """(rank, world size); world size 1 unless launched by torchrun / accelerate."""
    import torch.distributed as dist

    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and dist.is_available():
        if not dist.is_initialized():
            dist.init_process_group("nccl" if _cuda_available() else "gloo")
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


class ClipFineTuneModel(MultipleChoiceModel):
    trainable = True

    def __init__(
        self,
        path: str | Path,
        settings: TrainSettings = TrainSettings(),
        device: str = "cpu",
        dtype: str | None = None,
        grad_ckpt: bool | None = None,
        checkpoint_dir: str | Path | None = None,
        save_every: int | None = None,
        eval_batch: int = 64,
        workers: int | None = None,
        threads: int | None = None,
        name: str | None = None,
    ):
        from pipelines.evaluation.models.clip import ClipZeroShotModel

        self.path = Path(path).expanduser()
        self.settings = settings
        self.device = device
        self.dtype = resolve_dtype(dtype, device)
        self.grad_ckpt = is_cuda(device) if grad_ckpt is None else bool(grad_ckpt)
        self.checkpoint_dir = Path(checkpoint_dir) if checkpoint_dir else None
        self.save_every = save_every
        self.workers = resolve_workers(workers, device)
        self.name = name or canonical_name("clip-finetune", {"path": str(path), **settings.spec_params()})
        # Inference (valid selection happens in training; predictions go through the clip adapter).
        self.inference = ClipZeroShotModel(path, batch_size=eval_batch, device=device, dtype=self.dtype,
                                           workers=workers, threads=threads, name=self.name)
        self.eval_batch = eval_batch
        self.selection: dict[str, dict] = {}
        self._best_files: dict[str, Path] = {}
        self._base_model = None
        self.stop_after_steps: int | None = None  # tests: simulate a kill after this many steps

    # -- groups --------------------------------------------------------------------------
    def _group(self, question: EvalQuestion) -> str:
        return ALL_SUBJECTS if self.settings.scheme == "multi-task" else question.subject

    def _run_dir(self, group: str, train: list[EvalQuestion]) -> Path:
        root = self.checkpoint_dir
        if root is None:
            import tempfile

            root = self.checkpoint_dir = Path(tempfile.mkdtemp(prefix="clip-finetune-"))
        data = "\n".join(f"{q.question_id}\t{q.answer_idx}" for q in train)
        return root / f"{_slug(group)}-{_digest(self.name, group, data)}"

    # -- training ------------------------------------------------------------------------
    def fit(self, train: Sequence[EvalQuestion], valid: Sequence[EvalQuestion] = ()) -> "ClipFineTuneModel":
        train = [q for q in train if usable(q)]
        if self.settings.scheme == "few-shot":
            train = few_shot_sample(train, self.settings.shots, self.settings.seed)
        train_by: dict[str, list[EvalQuestion]] = defaultdict(list)
        valid_by: dict[str, list[EvalQuestion]] = defaultdict(list)
        for question in train:
            train_by[self._group(question)].append(question)
        for question in valid:
            if usable(question):
                valid_by[self._group(question)].append(question)
        self.selection, self._best_files = {}, {}
        for group in sorted(train_by):
            if not valid_by.get(group):
                raise ValueError(f"clip-finetune for {group}: no answered valid questions with a picture")
            run_dir = self._run_dir(group, train_by[group])
            self.selection[group] = self._fit_group(group, train_by[group], valid_by[group], run_dir)
            self._best_files[group] = run_dir / "best.pt"
        return self

    def _base(self):
        """A fresh fp32 copy of the CLIP at ``path`` (its weights kept on the CPU between groups)."""
        import copy

        import torch
        from transformers import CLIPModel

        self.inference._load()  # checks the directory, loads tokenizer and processor
        if self._base_model is None:
            self._base_model = CLIPModel.from_pretrained(str(self.path), local_files_only=True).float()
        return copy.deepcopy(self._base_model).to(device=self.device, dtype=torch.float32)

    def _fit_group(self, group: str, train: list[EvalQuestion], valid: list[EvalQuestion], run_dir: Path) -> dict:
        import torch

        done = run_dir / "run.json"
        if done.exists() and (run_dir / "best.pt").exists():
            return json.loads(done.read_text())["selection"]
        rank, world = _distributed()
        settings = self.settings
        per_epoch, total = plan_steps(settings, len(train))
        eval_every = settings.eval_every or per_epoch
        save_every = self.save_every or eval_every
        model = self._base()
        if self.grad_ckpt:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "embedding" not in n]
        rest = [p for n, p in model.named_parameters() if not (p.ndim >= 2 and "embedding" not in n)]
        optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": settings.weight_decay}, {"params": rest, "weight_decay": 0.0}],
            lr=settings.lr, betas=(0.9, 0.98), eps=1e-6,
        )
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s, total, settings.warmup))
        step, curve, stopper = 0, [], EarlyStopping(settings.patience)
        last = run_dir / "last.pt"
        if last.exists():
            state = torch.load(last, map_location=self.device, weights_only=False)
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            scheduler.load_state_dict(state["scheduler"])
            step, curve = state["step"], state["curve"]
            stopper = EarlyStopping(settings.patience, *state["stopper"])
        trained = logits_module(model, self.device)
        if world > 1:
            trained = torch.nn.parallel.DistributedDataParallel(trained, device_ids=[torch.device(self.device).index]
                                                                if is_cuda(self.device) else None)
        autocast = self.dtype in ("bf16", "fp16")
        amp_dtype = torch.bfloat16 if self.dtype == "bf16" else torch.float16
        scaler = torch.amp.GradScaler("cuda", enabled=self.dtype == "fp16" and is_cuda(self.device))
        tokenizer, processor = self.inference._tokenizer, self.inference._image_processor
        context = self.inference.context_length

        def save_last():
            if rank == 0:
                _save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                       "scheduler": scheduler.state_dict(), "step": step, "curve": curve,
                       "stopper": (stopper.best, stopper.best_step, stopper.bad)}, last)

        def evaluate() -> float:
            model.eval()
            batches = [list(range(i, min(i + self.eval_batch, len(valid)))) for i in range(0, len(valid), self.eval_batch)]
            loader = data_loader(QuestionBatch(valid, batches, tokenizer, context, processor), self.workers, self.device)
            correct = 0
            with torch.no_grad(), torch.autocast(_autocast_device(self.device), dtype=amp_dtype, enabled=autocast):
                for batch in loader:
                    logits = option_logits(model, batch, self.device)
                    answers = batch["answers"].to(logits.device)
                    correct += int(((logits.argmax(-1) == answers) & (answers != IGNORE)).sum())
            model.train()
            return correct / len(valid)

        if not curve:  # the zero-shot point: the curve starts with the weights before training
            curve.append({"step": 0, "epoch": 0.0, "valid_accuracy": evaluate()})
            stopper.update(curve[-1]["valid_accuracy"], 0)
            if rank == 0:
                _save(model.state_dict(), run_dir / "best.pt")
            save_last()
        model.train()
        batches = [batch_indices(settings, len(train), s) for s in range(step, total)]
        if world > 1:
            batches = [b[rank::world] or b[:1] for b in batches]
        loader = data_loader(QuestionBatch(train, batches, tokenizer, context, processor), self.workers, self.device)
        _sync(self.device)
        loop_start, pauses, samples, first_step = time.perf_counter(), 0.0, 0, step
        for batch in loader:
            if stopper.stop:
                break
            with torch.autocast(_autocast_device(self.device), dtype=amp_dtype, enabled=autocast):
                logits = trained(batch)
            loss = torch.nn.functional.cross_entropy(logits.float(), batch["answers"].to(logits.device),
                                                     ignore_index=IGNORE)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
            with torch.no_grad():
                model.logit_scale.clamp_(0, math.log(100))
            step += 1
            samples += int((batch["answers"] != IGNORE).sum())
            if step == first_step + 1:  # the session's first step warms up (kernels, workers): not timed
                _sync(self.device)
                loop_start, pauses, samples = time.perf_counter(), 0.0, 0
            if step % eval_every == 0 or step == total or step % save_every == 0:
                _sync(self.device)
                paused = time.perf_counter()
                if step % eval_every == 0 or step == total:
                    curve.append({"step": step, "epoch": round(step / per_epoch, 4), "valid_accuracy": evaluate()})
                    if stopper.update(curve[-1]["valid_accuracy"], step) and rank == 0:
                        _save(model.state_dict(), run_dir / "best.pt")
                save_last()
                pauses += time.perf_counter() - paused
            if self.stop_after_steps is not None and step >= self.stop_after_steps:
                raise KeyboardInterrupt(f"stopped after step {step} (test)")
        selection = {
            "group": group,
            "settings": self.settings.spec_params(),
            "train_questions": len(train),
            "valid_questions": len(valid),
            "steps_planned": total,
            "steps_run": step,
            "steps_per_epoch": per_epoch,
            "curve": curve,
            "best_step": stopper.best_step,
            "best_valid_accuracy": stopper.best,
            "stopped_early": stopper.stop,
            # this process's training steps of this session but its first (evaluations and checkpoints left out)
            "train_samples": samples,
            "train_seconds": round(time.perf_counter() - loop_start - pauses, 3),
        }
        if rank == 0:
            (run_dir / "run.json").write_text(json.dumps({"model": self.name, "selection": selection}, indent=1))
        if world > 1:
            import torch.distributed as dist

            dist.barrier()
        return selection

    # -- prediction ----------------------------------------------------------------------
    def trained_state(self, group: str):
        import torch

        return torch.load(self._best_files[group], map_location="cpu", weights_only=True)

    def predict(self, questions: Sequence[EvalQuestion]) -> list[Prediction]:
        if not self._best_files:
            raise ValueError(f"{self.name} must be fit on train/valid before predicting")
        by_group: dict[str, list[int]] = defaultdict(list)
        for i, question in enumerate(questions):
            by_group[self._group(question)].append(i)
        predictions: list[Prediction | None] = [None] * len(questions)
        for group, indices in sorted(by_group.items()):
            if group not in self._best_files:
                for i in indices:
                    predictions[i] = failed_prediction(questions[i].question_id, f"no model trained for subject {group}")
                continue
            model = self._base()
            model.load_state_dict(self.trained_state(group))
            self.inference.use_model(model)
            for i, prediction in zip(indices, self.inference.predict([questions[i] for i in indices])):
                predictions[i] = prediction
        return predictions


def _sync(device: str) -> None:
    import torch

    if is_cuda(device):
        torch.cuda.synchronize()


def _autocast_device(device: str) -> str:
    return "cuda" if is_cuda(device) else "cpu"


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in text)[:40]


FINETUNE_PARAMETERS = {
    "path", "scheme", "lr", "weight_decay", "warmup", "batch", "max_samples", "epochs", "k", "patience",
    "eval_every", "seed", "device", "dtype", "grad_ckpt", "checkpoint_dir", "save_every", "batch_size",
    "workers", "threads",
}


@register_model("clip-finetune", parameters=FINETUNE_PARAMETERS, extra="clip", needs="transformers")
def build_clip_finetune(args: ModelArgs) -> ClipFineTuneModel:
    def optional(key, cast):
        return args.number(key, None, cast)

    settings = TrainSettings.for_scheme(
        args.params.get("scheme", "subject"), lr=optional("lr", float), weight_decay=optional("weight_decay", float),
        warmup=optional("warmup", float), batch=optional("batch", int), max_samples=optional("max_samples", int),
        epochs=optional("epochs", int), shots=optional("k", int), patience=optional("patience", int),
        eval_every=optional("eval_every", int), seed=optional("seed", int),
    )
    grad_ckpt = args.params.get("grad_ckpt")
    if grad_ckpt not in (None, "0", "1"):
        raise ValueError(f"clip-finetune: grad_ckpt must be 0 or 1, got {grad_ckpt!r}")
    device = args.params.get("device", "cpu")
    checkpoint_dir = args.params.get("checkpoint_dir") or (
        Path(args.cache_dir).parent / "finetune" if args.cache_dir else None
    )
    path = args.required("path", "a local CLIP weights directory")
    given = {k: v for k, v in args.params.items() if k in ("path", "dtype")}
    return ClipFineTuneModel(
        path, settings, device=device, dtype=args.params.get("dtype") or None,
        grad_ckpt=None if grad_ckpt is None else grad_ckpt == "1", checkpoint_dir=checkpoint_dir,
        save_every=optional("save_every", int), eval_batch=args.number("batch_size", 64, int),
        workers=optional("workers", int), threads=optional("threads", int),
        name=canonical_name("clip-finetune", {**given, **settings.spec_params()}),
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Train (no predictions) with one or more GPUs: ``torchrun --nproc_per_node N -m
    pipelines.evaluation.models.finetune 'clip-finetune?path=DIR&device=cuda' --home DIR``."""
    import argparse

    import polars as pl

    from pipelines.evaluation.models.registry import build_model
    from pipelines.evaluation.stage import eval_questions, load_questions
    from pipelines.store.home import DataHome

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("spec", help="a clip-finetune spec, as given to stemforge build --model")
    parser.add_argument("--home", default=os.environ.get("STEMFORGE_HOME", "stemforge-data"), help="the data home")
    args = parser.parse_args(argv)
    home = DataHome(Path(args.home))
    rank = int(os.environ.get("LOCAL_RANK", "0"))
    spec = args.spec
    if "device=cuda" in spec and "device=cuda:" not in spec and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        import torch

        spec = spec.replace("device=cuda", f"device=cuda:{rank}")
        torch.cuda.set_device(rank)
    model = build_model(spec, cache_dir=home.cache / "responses")
    if not isinstance(model, ClipFineTuneModel):
        parser.error("the spec must be a clip-finetune model")
    questions = load_questions(home)
    answered = questions.filter(pl.col("answer_idx") >= 0)
    model.fit(eval_questions(answered.filter(pl.col("split") == "train"), home),
              eval_questions(answered.filter(pl.col("split") == "valid"), home))
    if int(os.environ.get("RANK", "0")) == 0:
        print(json.dumps({group: {k: s[k] for k in ("best_step", "best_valid_accuracy", "steps_run")}
                          for group, s in model.selection.items()}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
