"""CLIP inference speed on one card: the model alone on ready tensors vs our ``clip`` adapter,
in fp32 / TF32 / bf16, side by side, and the agreement of bf16 with fp32 predictions (issue 26).

The model is CLIP ViT-L/14@336px (the paper's) built from its configuration with random
weights, which costs the same compute as the released ones; nothing is downloaded. The
tokenizer is a byte-level BPE whose vocabulary holds the benchmark's words whole, so the
texts have about the token counts of real CLIP BPE. The questions: ``--questions`` (2,000)
of one distinct picture (a 480x360 PNG) and four text options, as in issue 26's table.

    python bench/gpu_eval.py                  # on a GPU: a few minutes
    python bench/gpu_eval.py --tiny           # a tiny CLIP on the CPU: seconds (checked in CI's way)
    python bench/gpu_eval.py --input-only     # the adapter's input pipeline alone, on the CPU (no model)

Ways timed (questions/s):
- ``model only``: image and text towers on ready tensors on the device (batch ``--batch``
  pictures and 4x as many texts), per dtype;
- ``adapter``: ``ClipZeroShotModel.predict`` from PNG files and strings (decode, preprocess,
  tokenize in DataLoader workers), per dtype, with a fresh picture cache;
- ``release``: one question per forward pass in fp32 (the released STEM evaluation's way),
  on the first ``--release-questions`` questions.
- ``--input-only``: the adapter's exact input pipeline (``clip.input_loader``: the same
  DataLoader items, workers and collate; pinned memory off on the CPU) run to the end without
  a model, on the GPU run's pictures or on We-Math's real ones (``--pictures wemath``), for each
  worker count of ``--workers`` (a list): questions/s, per worker process, and questions per
  CPU-second of the main process and its workers together (the rate of one core, whatever else
  the machine runs), with the main process's own CPU-ms a question.
Agreement: the share of questions where the bf16 (and TF32) adapter's answer is fp32's, and
the same where fp32's top-two margin is above 0.1 logit (random weights leave many near-ties).
Prints a Markdown table and, with ``--json FILE``, writes the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

WORDS = (
    "what which how many is are the a an of in on to from by with for and or not this that picture shows "
    "animal plant cell energy force magnet circuit light sound water rock soil weather cloud rain planet "
    "moon sun star triangle square circle rectangle angle line point number fraction decimal sum product "
    "difference equal greater less than more fewer most least object objects shape shapes color colour "
    "red blue green yellow heavy light hot cold solid liquid gas mass volume length area perimeter time "
    "clock hour minute money coin dollar cent graph table chart bar data mean median mode pattern next "
    "come comes best describes answer choose select correct option true false property material wood "
    "metal glass plastic paper fish bird mammal reptile insect leaf root stem flower seed fruit"
).split()


def byte_level_alphabet() -> list[str]:
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    codes, extra = printable[:], 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            codes.append(256 + extra)
            extra += 1
    return [chr(c) for c in codes]


def tokenizer_files():
    """(vocab, merges): byte-level characters, plus every word of WORDS as one token."""
    alphabet = byte_level_alphabet()
    vocab = {c: i for i, c in enumerate(alphabet)}
    vocab.update({c + "</w>": len(alphabet) + i for i, c in enumerate(alphabet)})
    merges: list[tuple[str, str]] = []
    seen = set()
    for word in WORDS:
        pieces = list(word[:-1]) + [word[-1] + "</w>"]
        while len(pieces) > 1:
            pair = (pieces[0], pieces[1])
            if pair not in seen:
                seen.add(pair)
                merges.append(pair)
                vocab.setdefault(pair[0] + pair[1], len(vocab))
            pieces = [pair[0] + pair[1]] + pieces[2:]
    vocab["<|startoftext|>"] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    return vocab, merges


def build_clip_dir(directory: Path, tiny: bool) -> Path:
    """A random-weight CLIP (ViT-L/14@336px, or a tiny one) saved with tokenizer and processor
    (kept when ``directory`` already holds one)."""
    if (directory / "config.json").exists() and (directory / "preprocessor_config.json").exists():
        return directory
    import torch
    from transformers import CLIPConfig, CLIPModel, CLIPTokenizer

    vocab, merges = tokenizer_files()
    tokenizer = CLIPTokenizer(vocab=vocab, merges=merges)
    special = dict(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                   pad_token_id=tokenizer.pad_token_id)
    if tiny:
        text = dict(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                    num_attention_heads=2, max_position_embeddings=77, **special)
        vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                      image_size=32, patch_size=8)
        projection, size = 16, 32
    else:  # openai/clip-vit-large-patch14-336
        text = dict(vocab_size=49408, hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                    num_attention_heads=12, max_position_embeddings=77, **special)
        vision = dict(hidden_size=1024, intermediate_size=4096, num_hidden_layers=24, num_attention_heads=16,
                      image_size=336, patch_size=14)
        projection, size = 768, 336
    torch.manual_seed(0)
    with torch.device("cuda" if torch.cuda.is_available() and not tiny else "cpu"):  # random init is slow on the CPU
        model = CLIPModel(CLIPConfig(text_config=text, vision_config=vision, projection_dim=projection))
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    image_processor(size).save_pretrained(directory)
    return directory


def image_processor(size: int):
    try:  # transformers >= 5.2x: the Pillow processor
        from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil as Processor
    except ImportError:
        from transformers import CLIPImageProcessor as Processor
    return Processor(size={"shortest_edge": size}, crop_size={"height": size, "width": size})


def make_questions(directory: Path, count: int, options: int = 4, seed: int = 0):
    from PIL import Image

    from pipelines.evaluation.models.base import EvalQuestion

    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(seed)
    questions = []
    pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 1)
    for i in range(count):
        base = rng.integers(0, 256, 3)
        pixels = np.clip(base[None, None, :] + rng.integers(-40, 41, (360, 480, 3)), 0, 255).astype(np.uint8)
        path = directory / f"q{i:05d}.png"
        if not path.exists():
            pool.submit(Image.fromarray(pixels).save, path)
        problem = " ".join(rng.choice(WORDS, size=int(rng.integers(10, 30))))
        choices = tuple(" ".join(rng.choice(WORDS, size=int(rng.integers(1, 4)))) for _ in range(options))
        questions.append(EvalQuestion(f"q{i:05d}", "science", "grade-3", "skill", "test", problem, path,
                                      choices, None, int(rng.integers(0, options))))
    pool.shutdown(wait=True)
    return questions


def sync(device: str):
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def model_only_rate(clip_dir: Path, device: str, dtype: str, batch: int, batches: int, text_length: int) -> float:
    """Questions/s of the two towers on ready tensors (``batch`` pictures, 4 texts each)."""
    import torch
    from transformers import CLIPModel

    from pipelines.evaluation.models.runtime import apply_matmul_precision, torch_dtype

    apply_matmul_precision(dtype, device)
    model = CLIPModel.from_pretrained(str(clip_dir)).to(device=device, dtype=torch_dtype(dtype)).eval()
    size = model.config.vision_config.image_size
    pixels = torch.randn(batch, 3, size, size, device=device, dtype=torch_dtype(dtype))
    ids = torch.randint(0, 300, (4 * batch, text_length), device=device)
    mask = torch.ones_like(ids)

    def step():
        with torch.inference_mode():
            model.get_image_features(pixel_values=pixels)
            model.get_text_features(input_ids=ids, attention_mask=mask)

    step()
    sync(device)
    start = time.perf_counter()
    for _ in range(batches):
        step()
    sync(device)
    rate = batch * batches / (time.perf_counter() - start)
    del model
    return rate


def adapter_run(clip_dir: Path, device: str, dtype: str, batch: int, questions, workers):
    from pipelines.evaluation.models.clip import ClipZeroShotModel

    model = ClipZeroShotModel(clip_dir, batch_size=batch, device=device, dtype=dtype, workers=workers)
    model.predict(questions[: min(len(questions), batch)])  # load, warm up kernels and workers
    model._image_cache.clear()
    sync(device)
    start = time.perf_counter()
    predictions = model.predict(questions)
    sync(device)
    rate = len(questions) / (time.perf_counter() - start)
    del model
    return rate, predictions


def release_rate(clip_dir: Path, device: str, questions) -> float:
    """One question per forward pass in fp32, the processor and tokenizer called per question."""
    import torch
    from PIL import Image
    from transformers import AutoImageProcessor, AutoTokenizer, CLIPModel

    from pipelines.evaluation.models.runtime import apply_matmul_precision

    apply_matmul_precision("fp32", device)
    model = CLIPModel.from_pretrained(str(clip_dir)).to(device).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(clip_dir))
    processor = AutoImageProcessor.from_pretrained(str(clip_dir))

    def answer(question):
        image = Image.open(question.problem_image).convert("RGB")
        pixels = processor(images=[image], return_tensors="pt")["pixel_values"].to(device)
        texts = [f"{question.problem} {o}" for o in question.choices]
        tokens = tokenizer(texts, padding="max_length", max_length=77, truncation=True, return_tensors="pt").to(device)
        with torch.inference_mode():
            return int(model(**tokens, pixel_values=pixels).logits_per_image[0].argmax())

    answer(questions[0])
    sync(device)
    start = time.perf_counter()
    for question in questions:
        answer(question)
    sync(device)
    return len(questions) / (time.perf_counter() - start)


def agreement(reference, other) -> tuple[float, float, int]:
    same = [a.prediction == b.prediction for a, b in zip(reference, other)]
    margins = [np.diff(sorted(p.option_scores))[-1] if p.option_scores else 0.0 for p in reference]
    clear = [s for s, m in zip(same, margins) if m > 0.1]
    return float(np.mean(same)), (float(np.mean(clear)) if clear else float("nan")), len(clear)


def input_dir(directory: Path, size: int = 336) -> Path:
    """Tokenizer and image processor of the ViT-L/14@336px benchmark, without the model (the
    input pipeline needs no weights)."""
    if (directory / "preprocessor_config.json").exists():
        return directory
    from transformers import CLIPTokenizer

    vocab, merges = tokenizer_files()
    directory.mkdir(parents=True, exist_ok=True)
    CLIPTokenizer(vocab=vocab, merges=merges).save_pretrained(directory)
    image_processor(size).save_pretrained(directory)
    return directory


def wemath_questions(count: int):
    """Real pictures: We-Math testmini (../shared/corpora, see its README), its options split at ';'."""
    import re

    from pipelines.evaluation.models.base import EvalQuestion

    root = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "wemath" / "data"
    rows = json.loads((root / "testmini.json").read_text())[:count]
    questions = []
    for i, row in enumerate(rows):
        options = tuple(re.sub(r"^\s*[A-Z]\.\s*", "", o).strip() or "?" for o in row["option"].split(";"))
        answer = ord(row["answer"].strip()[:1] or "A") - ord("A")
        questions.append(EvalQuestion(f"w{i:05d}", "math", "testmini", "skill", "test", row["question"],
                                      root / row["image_path"], options, None, min(max(answer, 0), len(options) - 1)))
    return questions


def input_rate(directory: Path, questions, workers: int) -> dict:
    """The ``clip`` adapter's input pipeline without the model: the same DataLoader (items,
    workers, collate; pinned memory off on the CPU) run to the end. Wall questions/s and the
    CPU seconds spent by the main process and its (reaped) workers, whence questions per
    CPU-second: the rate one core gives, whatever else the machine runs."""
    import resource

    from transformers import AutoImageProcessor, AutoTokenizer

    from pipelines.evaluation.models.clip import input_loader

    tokenizer = AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
    processor = AutoImageProcessor.from_pretrained(str(directory), local_files_only=True)
    paths = sorted({str(q.problem_image) for q in questions})

    def cpu():
        own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return np.array([own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime])

    cpu0, wall0 = cpu(), time.perf_counter()
    _, loader = input_loader(questions, paths, workers, "cpu", tokenizer, 77, processor)
    pictures = 0
    for item in loader:
        if item[0] == "image" and item[2] is not None:
            pictures += len(item[1])
    del loader  # its workers are reaped (their CPU time counted) when the iterator ends
    wall, (main_cpu, worker_cpu) = time.perf_counter() - wall0, cpu() - cpu0
    used = main_cpu + worker_cpu
    return {"workers": workers, "questions": len(questions), "pictures": pictures, "wall_s": wall,
            "cpu_s": used, "main_cpu_ms_per_question": 1000 * main_cpu / len(questions),
            "questions_per_s": len(questions) / wall,
            "questions_per_s_per_worker": len(questions) / wall / max(1, workers),
            "questions_per_cpu_s": len(questions) / used}


def input_only(args) -> int:
    work = args.work or Path(tempfile.mkdtemp(prefix="gpu-eval-"))
    work.mkdir(parents=True, exist_ok=True)
    directory = input_dir(work / "inputs")
    count = args.questions or 2000
    if args.pictures == "wemath":
        questions = wemath_questions(count)
        distinct = len({q.problem_image for q in questions})
        what = f"{len(questions)} We-Math testmini questions (real pictures, {distinct} distinct)"
    else:
        questions = make_questions(work, count)
        what = f"{count} questions of one distinct 480x360 PNG and 4 options (the GPU run's)"
    workers = [int(w) for w in str(args.workers if args.workers is not None else "0,1,2").split(",")]
    print(f"input pipeline only (no model), CPU ({os.cpu_count()} cores), {what}, processor 336 px", flush=True)
    runs = []
    for _ in range(args.repeats):
        for w in workers:
            run = input_rate(directory, questions, w)
            runs.append(run)
            print(f"workers {w}: {run['questions_per_s']:.1f} questions/s wall "
                  f"({run['questions_per_s_per_worker']:.1f} per worker process), "
                  f"{run['questions_per_cpu_s']:.1f} questions per CPU-second, main process "
                  f"{run['main_cpu_ms_per_question']:.2f} CPU-ms a question", flush=True)
    print()
    print("| workers | questions/s wall (median) | per worker process | questions per CPU-second (median) "
          "| main process CPU-ms a question (median) |")
    print("|---|---|---|---|---|")
    summary = {}
    for w in workers:
        mine = [r for r in runs if r["workers"] == w]
        wall = float(np.median([r["questions_per_s"] for r in mine]))
        per_cpu = float(np.median([r["questions_per_cpu_s"] for r in mine]))
        main_ms = float(np.median([r["main_cpu_ms_per_question"] for r in mine]))
        summary[w] = {"questions_per_s": wall, "questions_per_cpu_s": per_cpu, "main_cpu_ms_per_question": main_ms}
        print(f"| {w} | {wall:.1f} | {wall / max(1, w):.1f} | {per_cpu:.1f} | {main_ms:.2f} |")
    with_workers = [w for w in workers if w > 0] or workers
    per_core = summary[max(with_workers)]["questions_per_cpu_s"]  # worker processes: decoding plus passing
    print(f"projection: 15 workers (16 cores, one left to the main process) x {per_core:.1f} questions per "
          f"CPU-second (workers {max(with_workers)}) = {15 * per_core:.0f} questions/s, if the cores are as fast "
          f"as these; 80% of the H100's bf16 model-only rate needs 565 (of 706) or 719 (of 899)")
    if args.json:
        args.json.write_text(json.dumps({"pictures": args.pictures, "runs": runs, "summary": summary}, indent=1))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a tiny CLIP on the CPU (a check that runs anywhere)")
    parser.add_argument("--device", default=None, help="default cuda when available, else cpu")
    parser.add_argument("--questions", type=int, default=None, help="default 2000 (64 with --tiny)")
    parser.add_argument("--batch", type=int, default=256, help="adapter and model-only batch (pictures)")
    parser.add_argument("--workers", default=None,
                        help="adapter DataLoader workers (default: runtime.py's); --input-only: a list such as 0,1,2")
    parser.add_argument("--release-questions", type=int, default=200)
    parser.add_argument("--dtypes", default="fp32,tf32,bf16")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument("--work", type=Path, default=None, help="folder for the model and pictures (kept, reused)")
    parser.add_argument("--input-only", action="store_true",
                        help="the adapter's input pipeline alone (no model, CPU): questions/s per worker and per "
                             "CPU-second; --workers takes a list (default 0,1,2)")
    parser.add_argument("--pictures", choices=("bench", "wemath"), default="bench",
                        help="--input-only: the GPU run's synthetic PNGs, or We-Math's real pictures")
    parser.add_argument("--repeats", type=int, default=3, help="--input-only: runs of each worker count")
    args = parser.parse_args(argv)
    if args.input_only:
        return input_only(args)
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() and not args.tiny else "cpu")
    count = args.questions or (64 if args.tiny else 2000)
    batch = min(args.batch, 32) if args.tiny else args.batch
    dtypes = [d for d in args.dtypes.split(",") if d]
    card = torch.cuda.get_device_name(0) if device.startswith("cuda") else f"CPU ({os.cpu_count()} cores)"
    work = args.work or Path(tempfile.mkdtemp(prefix="gpu-eval-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    clip_dir = build_clip_dir(work / "clip", args.tiny)
    questions = make_questions(work, count)
    print(f"{card}: {'tiny CLIP' if args.tiny else 'CLIP ViT-L/14@336px, random weights'}, "
          f"{count} questions of one picture and 4 options; setup {time.perf_counter() - started:.0f} s", flush=True)

    from pipelines.evaluation.models.clip import ClipZeroShotModel

    probe = ClipZeroShotModel(clip_dir)
    lengths = [len(s) for q in questions[:200] for s in probe.text_token_ids(q)]
    text_length = int(np.ceil(np.mean(lengths)))
    figures = {"card": card, "device": device, "questions": count, "batch": batch, "tiny": args.tiny,
               "mean_text_tokens": text_length, "model_only": {}, "adapter": {}, "agreement": {}}
    model_batches = 2 if args.tiny else 6
    for dtype in dtypes:
        figures["model_only"][dtype] = model_only_rate(clip_dir, device, dtype, batch, model_batches, text_length)
        print(f"model only {dtype}: {figures['model_only'][dtype]:.1f} questions/s", flush=True)
    predictions = {}
    for dtype in dtypes:
        figures["adapter"][dtype], predictions[dtype] = adapter_run(
            clip_dir, device, dtype, batch, questions, None if args.workers is None else int(args.workers))
        print(f"adapter {dtype}: {figures['adapter'][dtype]:.1f} questions/s", flush=True)
    if args.tiny:
        args.release_questions = min(args.release_questions, 16)
    if args.release_questions:
        figures["release_fp32"] = release_rate(clip_dir, device, questions[: args.release_questions])
        print(f"release (one question per pass, fp32): {figures['release_fp32']:.1f} questions/s", flush=True)
    if "fp32" in predictions:
        for dtype in dtypes:
            if dtype != "fp32":
                figures["agreement"][dtype] = dict(zip(("all", "clear_margin", "clear_questions"),
                                                       agreement(predictions["fp32"], predictions[dtype])))

    print()
    print(f"| way ({card}) | questions/s |")
    print("|---|---|")
    for dtype in dtypes:
        print(f"| model alone on ready tensors, {dtype} | {figures['model_only'][dtype]:.0f} |")
    for dtype in dtypes:
        share = figures["adapter"][dtype] / figures["model_only"][dtype]
        print(f"| our `clip` adapter, {dtype}, batch {batch} | {figures['adapter'][dtype]:.0f} ({share:.0%} of the model alone) |")
    if "release_fp32" in figures:
        print(f"| one question per forward pass (the release's way), fp32 | {figures['release_fp32']:.0f} |")
    for dtype, a in figures["agreement"].items():
        print(f"agreement {dtype} vs fp32: {a['all']:.1%} of {count} questions; {a['clear_margin']:.1%} of the "
              f"{a['clear_questions']} whose fp32 top-two margin > 0.1 logit")
    print(f"total {time.perf_counter() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
