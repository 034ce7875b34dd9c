"""Torch runtime settings shared by the torch adapters (``clip``, ``embedding``, ``clip-finetune``).

- ``dtype``: ``bf16`` | ``fp16`` | ``tf32`` | ``fp32``; default (``None`` or ``auto``) bf16 on
  CUDA, fp32 elsewhere. bf16/fp16 cast the weights for inference; tf32 keeps fp32 weights and
  lets CUDA matmuls and convolutions use TF32 (Ampere and newer).
- ``workers``: DataLoader worker processes that decode, preprocess and tokenize while the
  model runs; default 0 on the CPU (the model already uses the cores), min(16, cores - 1) on CUDA.
  On CUDA the batches are pinned and copied without blocking; workers prefetch 4 batches each.

torch is imported inside the functions only (the models package is listed without torch).
"""

from __future__ import annotations

import os

DTYPES = ("bf16", "fp16", "tf32", "fp32")
PREFETCH = 4


def is_cuda(device: str) -> bool:
    return str(device).startswith("cuda")


def resolve_dtype(dtype: str | None, device: str) -> str:
    if dtype in (None, "", "auto"):
        return "bf16" if is_cuda(device) else "fp32"
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)} (or auto), got {dtype!r}")
    return dtype


def torch_dtype(dtype: str):
    import torch

    return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(dtype, torch.float32)


def apply_matmul_precision(dtype: str, device: str) -> None:
    """TF32 on for ``tf32``, off for ``fp32`` (CUDA only; a process-wide torch setting)."""
    if not is_cuda(device):
        return
    import torch

    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    torch.backends.cudnn.allow_tf32 = dtype == "tf32"


def resolve_workers(workers: int | None, device: str) -> int:
    if workers is not None:
        return max(0, int(workers))
    if not is_cuda(device):
        return 0
    return max(0, min(16, (os.cpu_count() or 1) - 1))


def data_loader(dataset, workers: int, device: str, collate_fn=None, batch_size=None):
    """A DataLoader whose workers build whole batches (``batch_size=None``: each item is one
    batch), pinned and prefetched on CUDA."""
    from torch.utils.data import DataLoader

    kwargs = dict(batch_size=batch_size, num_workers=workers, pin_memory=is_cuda(device),
                  collate_fn=collate_fn if collate_fn is not None else _identity)
    if workers:
        kwargs.update(prefetch_factor=PREFETCH, persistent_workers=False)
    return DataLoader(dataset, **kwargs)


def _identity(batch):
    return batch


def to_device(tensor, device: str, dtype=None):
    return tensor.to(device=device, dtype=dtype, non_blocking=is_cuda(device))
