"""OpenAI-compatible chat-completions adapter (``POST {base_url}/chat/completions``).

Modes:
- ``llm``: text only; the question image is replaced by its caption (a ``Context:`` line, as
  the paper feeds GPT-3.5 captions) and image options by their captions. Image options
  without captions cannot be asked: prediction -1, error ``no text for image options``.
- ``vlm``: the question image and option images are sent as base64 ``data:`` URLs in
  ``image_url`` content parts, interleaved with the text.

Prompt (llm mode; vlm mode has the same text with the images in place):

    Answer the following multiple-choice question. Reply with the letter of the correct option only.

    Question: {problem}
    Context: {caption}                      (llm mode, when the question image has a caption)
    Options:
    (A) {option A}
    (B) {option B}
    Answer:

Requests use temperature 0 and ``max_tokens`` (default 16). The reply's text goes through
the rule chain in ``extraction.py``; confidence is None (no probabilities are returned).

Cache: every successful reply is stored (SQLite ``responses.sqlite`` under ``cache_dir``)
under sha256(model, prompt hash, content hash), where the prompt hash covers the request
body with each image replaced by its sha256 and the content hash covers the images' sha256.
A rerun sends nothing for cached replies and an interrupted run resumes where it stopped.
Transport failures are not cached, so a later run asks again.

Failures: a timeout, connection error, HTTP 429/5xx, or a garbage reply (not JSON, no
``choices[0].message.content``) is retried up to ``max_retries`` times with exponential
backoff (``backoff``, doubled each time, capped at 30 s, jittered) or the ``Retry-After`` the
server asks (``pipelines.http.RetryPolicy``); other HTTP errors are not retried.
Then the sample is recorded as failed (prediction -1, error set), never as an answer.

The API key is read from the environment variable named by ``api_key_env`` (default
``OPENAI_API_KEY``) when a request is sent; it is never stored in names, caches or errors.
When the variable is unset, no Authorization header is sent (local servers).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from pipelines.http import DeadlineSession, RetryPolicy, retryable_status
from pipelines.evaluation.models.base import OPTION_LETTERS, EvalQuestion, MultipleChoiceModel, Prediction
from pipelines.evaluation.models.extraction import extract_answer
from pipelines.evaluation.models.registry import ModelArgs, register_model

MODES = ("llm", "vlm")
INSTRUCTION = (
    "Answer the following multiple-choice question. Reply with the letter of the correct option only."
)
MIME_BY_SUFFIX = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".bmp": "image/bmp",
}
MAX_BACKOFF_SECONDS = 30.0


class ChatRequestFailed(Exception):
    """A request that failed for good; the message is a one-line reason."""


@dataclass(frozen=True)
class ChatPrompt:
    """The request body with image placeholders, and the images it refers to."""

    body: dict
    images: tuple[tuple[str, Path], ...]  # (sha256, path), in placeholder order

    @property
    def prompt_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()

    @property
    def content_hash(self) -> str:
        return hashlib.sha256("\n".join(h for h, _ in self.images).encode()).hexdigest()


def _image_ref(path: Path) -> tuple[str, Path]:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest(), Path(path)


def build_prompt(question: EvalQuestion, model: str, mode: str, max_tokens: int) -> ChatPrompt:
    """The request for one question; raises ValueError when the mode cannot ask it."""
    if mode not in MODES:
        raise ValueError(f"unknown chat mode {mode!r} (expected llm or vlm)")
    images: list[tuple[str, Path]] = []
    parts: list[dict] = []

    def text(value: str) -> None:
        if parts and parts[-1]["type"] == "text":
            parts[-1]["text"] += value
        else:
            parts.append({"type": "text", "text": value})

    def image(path: Path) -> None:
        ref = _image_ref(path)
        images.append(ref)
        parts.append({"type": "image_url", "image_url": {"url": f"sha256:{ref[0]}"}})

    text(f"{INSTRUCTION}\n\nQuestion: {question.problem}\n")
    if mode == "vlm" and question.problem_image is not None:
        image(question.problem_image)
        text("\n")
    if mode == "llm" and question.caption:
        text(f"Context: {question.caption}\n")
    text("Options:\n")
    for index in range(question.num_options):
        letter = OPTION_LETTERS[index]
        if question.choices is not None:
            text(f"({letter}) {question.choices[index]}\n")
        elif mode == "vlm":
            text(f"({letter}) ")
            image(question.choice_images[index])
            text("\n")
        else:
            caption = (question.choice_captions or (None,) * question.num_options)[index]
            if not caption:
                raise ValueError("no text for image options")
            text(f"({letter}) {caption}\n")
    text("Answer:")
    content: str | list[dict] = parts[0]["text"] if len(parts) == 1 else parts
    body = {
        "model": model,
        "messages": [{"role": "user", "content": content}],
        "temperature": 0,
        "max_tokens": max_tokens,
    }
    return ChatPrompt(body, tuple(images))


def _with_images(body: dict, images: Sequence[tuple[str, Path]]) -> dict:
    """The body to send: placeholders replaced by base64 data URLs."""
    urls = {}
    for digest, path in images:
        if digest not in urls:
            mime = MIME_BY_SUFFIX.get(path.suffix.lower(), "image/png")
            urls[digest] = f"data:{mime};base64," + base64.b64encode(path.read_bytes()).decode("ascii")
    content = body["messages"][0]["content"]
    if isinstance(content, str):
        return body
    new_parts = []
    for part in content:
        if part["type"] == "image_url":
            digest = part["image_url"]["url"].removeprefix("sha256:")
            part = {"type": "image_url", "image_url": {"url": urls[digest]}}
        new_parts.append(part)
    return {**body, "messages": [{"role": "user", "content": new_parts}]}


class ResponseCache:
    """Replies by key; SQLite on disk when a directory is given, else in memory."""

    def __init__(self, cache_dir: str | Path | None):
        self._lock = threading.Lock()
        self._memory: dict[str, str] = {}
        self._db = None
        if cache_dir is not None:
            directory = Path(cache_dir)
            directory.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(directory / "responses.sqlite"), check_same_thread=False)
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, model TEXT, prompt_hash TEXT,"
                " content_hash TEXT, response TEXT NOT NULL)"
            )
            self._db.commit()

    def get(self, key: str) -> str | None:
        with self._lock:
            if self._db is None:
                return self._memory.get(key)
            row = self._db.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
            return None if row is None else row[0]

    def put(self, key: str, model: str, prompt: ChatPrompt, response: str) -> None:
        with self._lock:
            if self._db is None:
                self._memory[key] = response
                return
            self._db.execute(
                "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?)",
                (key, model, prompt.prompt_hash, prompt.content_hash, response),
            )
            self._db.commit()

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


def cache_key(model: str, prompt: ChatPrompt) -> str:
    return hashlib.sha256(f"{model}\x00{prompt.prompt_hash}\x00{prompt.content_hash}".encode()).hexdigest()


class OpenAIChatModel(MultipleChoiceModel):
    def __init__(
        self,
        base_url: str,
        model: str,
        mode: str = "llm",
        api_key_env: str = "OPENAI_API_KEY",
        cache_dir: str | Path | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff: float = 1.0,
        max_tokens: int = 16,
        workers: int = 4,
        name: str | None = None,
    ):
        if mode not in MODES:
            raise ValueError(f"unknown chat mode {mode!r} (expected llm or vlm)")
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"chat base_url must start with http:// or https://, got {base_url!r}")
        if not model:
            raise ValueError("chat model name is empty")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.mode = mode
        self.api_key_env = api_key_env
        self.timeout = float(timeout)
        self.max_retries = max(0, int(max_retries))
        self.backoff = max(0.0, float(backoff))
        self.policy = RetryPolicy(retries=self.max_retries, backoff=self.backoff, backoff_cap=MAX_BACKOFF_SECONDS,
                                  timeout=self.timeout)
        self.max_tokens = int(max_tokens)
        self.workers = max(1, int(workers))
        self.cache = ResponseCache(cache_dir)
        self.name = name or f"openai?model={model}&mode={mode}"
        self.requests_sent = 0
        self._counter_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"OpenAIChatModel(base_url={self.base_url!r}, model={self.model!r}, mode={self.mode!r})"

    def _headers(self) -> dict:
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _send(self, session, body: dict) -> str:
        """The reply's text; raises ChatRequestFailed after the bounded retries."""
        import requests

        url = f"{self.base_url}/chat/completions"
        last_error, failed, waited, attempts = "no attempt", None, 0.0, 0
        for attempt in range(self.max_retries + 1):
            if attempt:
                delay = self.policy.retry_delay(failed, attempt, waited)
                if delay is None:
                    break
                time.sleep(delay)
                waited += delay
            failed = None
            attempts += 1
            with self._counter_lock:
                self.requests_sent += 1
            try:
                reply = session.post(url, json=body, headers=self._headers(), timeout=self.policy.timeout)
            except requests.Timeout:
                last_error = f"timeout after {self.timeout:g} s"
                continue
            except requests.RequestException as exc:
                last_error = f"connection error: {type(exc).__name__}"
                continue
            if retryable_status(reply.status_code):
                last_error, failed = f"HTTP {reply.status_code}", reply
                continue
            if reply.status_code != 200:
                detail = " ".join(reply.text.split())[:200]
                raise ChatRequestFailed(f"HTTP {reply.status_code}: {detail}")
            try:
                content = reply.json()["choices"][0]["message"]["content"]
            except (ValueError, KeyError, IndexError, TypeError):
                last_error = "garbage reply: " + (" ".join(reply.text.split())[:80] or "empty body")
                continue
            if isinstance(content, list):
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
            if not isinstance(content, str):
                last_error = "garbage reply: message content is not text"
                continue
            return content
        raise ChatRequestFailed(f"{last_error} ({attempts} attempts)")

    def _answer(self, session, question: EvalQuestion) -> Prediction:
        qid = question.question_id
        try:
            prompt = build_prompt(question, self.model, self.mode, self.max_tokens)
        except (ValueError, OSError) as exc:
            return Prediction(qid, -1, error=str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        key = cache_key(self.model, prompt)
        response = self.cache.get(key)
        if response is None:
            try:
                response = self._send(session, _with_images(prompt.body, prompt.images))
            except ChatRequestFailed as exc:
                return Prediction(qid, -1, error=str(exc))
            except OSError as exc:
                return Prediction(qid, -1, error=f"unreadable image: {type(exc).__name__}")
            self.cache.put(key, self.model, prompt, response)
        extraction = extract_answer(response, question.num_options, question.choices)
        return Prediction(
            question_id=qid,
            prediction=extraction.index,
            raw=response,
            rule=extraction.rule,
            error=extraction.error,
        )

    def predict(self, questions: Sequence[EvalQuestion]) -> list[Prediction]:
        import requests

        with DeadlineSession(self.timeout) as session:  # a drip-fed reply costs the timeout, not more
            if self.workers == 1 or len(questions) <= 1:
                return [self._answer(session, q) for q in questions]
            with ThreadPoolExecutor(max_workers=self.workers) as pool:
                return list(pool.map(lambda q: self._answer(session, q), questions))


@register_model("openai", parameters={"base_url", "model", "mode", "api_key_env", "timeout", "max_retries",
                                      "backoff", "max_tokens", "workers", "cache_dir"})
def build_openai(args: ModelArgs) -> OpenAIChatModel:
    base_url, model = args.required("base_url"), args.required("model")
    return OpenAIChatModel(
        base_url=base_url,
        model=model,
        mode=args.params.get("mode", "llm"),
        api_key_env=args.params.get("api_key_env", "OPENAI_API_KEY"),
        cache_dir=args.params.get("cache_dir") or args.cache_dir,
        timeout=args.number("timeout", 60.0),
        max_retries=args.number("max_retries", 3, int),
        backoff=args.number("backoff", 1.0),
        max_tokens=args.number("max_tokens", 16, int),
        workers=args.number("workers", 4, int),
        name=args.name,
    )
