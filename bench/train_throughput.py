"""Fine-tuning throughput of ``clip-finetune`` on one card (issue 26): training samples/s and
peak GPU memory of the paper's setup (AdamW, bf16 autocast, gradient checkpointing) on CLIP
ViT-L/14@336px built with random weights (nothing downloaded), through the adapter's own
training loop (``ClipFineTuneModel.fit``: DataLoader workers decoding PNGs, option logits,
cross-entropy, checkpoints; the timing leaves evaluations and checkpoint writes out).

    python bench/train_throughput.py                 # on a GPU: batch 32 and 128, a few minutes
    python bench/train_throughput.py --tiny          # a tiny CLIP on the CPU: seconds

Prints one row per batch size: samples/s, the minutes 100k samples (the paper's budget per
subject) would take, and the peak memory.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_eval import build_clip_dir, make_questions  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a tiny CLIP on the CPU")
    parser.add_argument("--device", default=None, help="default cuda when available, else cpu")
    parser.add_argument("--batches", default=None, help="comma-separated batch sizes (default 32,128; 8 with --tiny)")
    parser.add_argument("--steps", type=int, default=None, help="training steps per batch size (default 16; 4 with --tiny)")
    parser.add_argument("--dtype", default=None, help="bf16 (default on CUDA) | fp16 | fp32")
    parser.add_argument("--grad-ckpt", type=int, default=None, help="1/0 (default 1 on CUDA)")
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--work", type=Path, default=None, help="folder for the model and pictures (gpu_eval.py's --work reused)")
    args = parser.parse_args(argv)
    import torch

    from pipelines.evaluation.models.finetune import ClipFineTuneModel, TrainSettings

    device = args.device or ("cuda" if torch.cuda.is_available() and not args.tiny else "cpu")
    batches = [int(b) for b in (args.batches or ("8" if args.tiny else "32,128")).split(",")]
    steps = args.steps or (4 if args.tiny else 16)
    card = torch.cuda.get_device_name(0) if device.startswith("cuda") else "CPU"
    work = args.work or Path(tempfile.mkdtemp(prefix="train-throughput-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    clip_dir = build_clip_dir(work / "clip", args.tiny)
    questions = make_questions(work, max(batches) * steps + 16)
    train = [replace(q, split="train") for q in questions[:-16]]
    valid = questions[-16:]
    print(f"{card}: {'tiny CLIP' if args.tiny else 'CLIP ViT-L/14@336px, random weights'}; "
          f"setup {time.perf_counter() - started:.0f} s", flush=True)
    rows = []
    for batch in batches:
        settings = TrainSettings.for_scheme("subject", batch=batch, max_samples=batch * steps, epochs=1,
                                            eval_every=10**9)
        model = ClipFineTuneModel(clip_dir, settings, device=device, dtype=args.dtype,
                                  grad_ckpt=None if args.grad_ckpt is None else bool(args.grad_ckpt),
                                  checkpoint_dir=tempfile.mkdtemp(prefix=f"ckpt-{batch}-", dir=work), eval_batch=16, workers=args.workers)
        if device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        model.fit(train[: batch * steps], valid)
        selection = model.selection["science"]
        rate = selection["train_samples"] / selection["train_seconds"]
        peak = torch.cuda.max_memory_allocated() / 2**30 if device.startswith("cuda") else float("nan")
        rows.append({"batch": batch, "steps": selection["steps_run"], "samples_per_s": rate, "peak_gib": peak,
                     "dtype": model.dtype, "grad_ckpt": model.grad_ckpt,
                     "minutes_per_100k": 100_000 / rate / 60})
        print(f"batch {batch}: {rate:.1f} samples/s", flush=True)
        del model
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    print()
    print(f"| {card}: batch | dtype | gradient checkpointing | samples/s | minutes per 100k samples | peak GiB |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['batch']} | {r['dtype']} | {'on' if r['grad_ckpt'] else 'off'} | {r['samples_per_s']:.1f} | "
              f"{r['minutes_per_100k']:.1f} | {r['peak_gib']:.1f} |")
    print(f"total {time.perf_counter() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({"card": card, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
