"""The OpenAI-compatible chat adapter against a fake server on 127.0.0.1."""

from __future__ import annotations

import base64
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from PIL import Image

from pipelines.evaluation.models import EvalQuestion, build_model
from pipelines.evaluation.models.openai_chat import OpenAIChatModel, build_prompt


class FakeChatServer:
    """Replies according to a tag in the question text:

    ``[ans:X]`` -> "Answer: X"; ``[raw:TEXT]`` -> TEXT; ``[sleep]`` -> sleeps 1 s first;
    ``[garbage]`` -> a non-JSON body; ``[flaky]`` -> garbage on the first request, then ``[ans:...]``;
    ``[http500]`` -> 500 on the first request; ``[bad-request]`` -> 400; ``[drip]`` -> the
    headers at once, then the body one byte every 50 ms (slow-loris, about 4 s in all).
    """

    def __init__(self):
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.requests.append(body)
                    server.headers.append(dict(self.headers))
                    seen = sum(1 for r in server.requests if r == body)
                content = body["messages"][0]["content"]
                text = content if isinstance(content, str) else " ".join(
                    p["text"] for p in content if p["type"] == "text"
                )
                try:
                    if "[drip]" in text:
                        reply = json.dumps({"choices": [{"message": {"role": "assistant", "content": "Answer: A"
                                                                     + " " * 80}}]}).encode()
                        self.send_response(200)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", str(len(reply)))
                        self.end_headers()
                        for byte in reply:
                            self.wfile.write(bytes([byte]))
                            self.wfile.flush()
                            time.sleep(0.05)
                        return
                    if "[sleep]" in text:
                        time.sleep(1.0)
                    if "[bad-request]" in text:
                        return self._send(400, b'{"error": "bad request"}')
                    if "[garbage]" in text or ("[flaky]" in text and seen == 1):
                        return self._send(200, b"<html>oops</html>")
                    if "[http500]" in text and seen == 1:
                        return self._send(500, b"overloaded")
                    raw = re.search(r"\[raw:([^\]]*)\]", text)
                    answer = raw.group(1) if raw else "Answer: " + re.search(r"\[ans:(\w)\]", text).group(1)
                    reply = {"choices": [{"message": {"role": "assistant", "content": answer}}]}
                    self._send(200, json.dumps(reply).encode())
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _send(self, status, payload):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    @property
    def hits(self) -> int:
        with self.lock:
            return len(self.requests)

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    fake = FakeChatServer()
    yield fake
    fake.close()


def png(directory: Path, name: str, color) -> Path:
    path = directory / f"{name}.png"
    Image.new("RGB", (12, 10), color).save(path)
    return path


def question(qid, problem, choices=("cat", "dog", "cow"), image=None, caption=None, choice_images=None,
             choice_captions=None):
    return EvalQuestion(
        question_id=qid, subject="science", grade="grade-2", skill="animals", split="test", problem=problem,
        problem_image=image, choices=None if choice_images else choices, choice_images=choice_images,
        answer_idx=-1, caption=caption, choice_captions=choice_captions,
    )


def chat(server, cache_dir, **kwargs) -> OpenAIChatModel:
    options = dict(model="fake-model", mode="llm", timeout=5, max_retries=2, backoff=0.01, workers=2)
    options.update(kwargs)
    return OpenAIChatModel(server.base_url, cache_dir=cache_dir, **options)


def test_llm_mode_prompt_cache_and_resume(server, tmp_path):
    image = png(tmp_path, "farm", (10, 200, 10))
    questions = [
        question("q1", "Which animal says moo? [ans:C]", image=image, caption="a cow in a field"),
        question("q2", "Which animal barks? [raw:(B)]"),
        question("q3", "Which animal purrs? [raw:It is the cat.]"),
        question("q4", "Which animal is largest? [ans:C]"),
    ]
    cache = tmp_path / "cache"
    first = chat(server, cache).predict(questions[:2])  # an interrupted run
    assert server.hits == 2
    body = next(r for r in server.requests if "moo" in r["messages"][0]["content"])
    assert body["model"] == "fake-model" and body["temperature"] == 0
    prompt = body["messages"][0]["content"]
    assert isinstance(prompt, str) and "Context: a cow in a field" in prompt
    assert "(A) cat\n(B) dog\n(C) cow\nAnswer:" in prompt

    resumed = chat(server, cache).predict(questions)
    assert server.hits == 4  # only q3 and q4 were asked
    assert resumed[:2] == first
    assert [(p.prediction, p.rule) for p in resumed] == [
        (2, "answer-phrase"), (1, "exact-letter"), (0, "option-text"), (2, "answer-phrase")
    ]
    assert resumed[2].raw == "It is the cat." and resumed[2].error is None

    rerun = chat(server, cache).predict(questions)
    assert server.hits == 4 and rerun == resumed  # a rerun costs nothing

    other_model = chat(server, cache, model="other-model").predict(questions[:1])
    assert server.hits == 5 and other_model[0].prediction == 2


def test_vlm_mode_sends_images_as_data_urls_and_hashes_content(server, tmp_path):
    problem_image = png(tmp_path, "scene", (200, 0, 0))
    options = (png(tmp_path, "o1", (0, 0, 255)), png(tmp_path, "o2", (0, 255, 0)))
    q = question("v1", "Which shape matches? [ans:B]", image=problem_image, choice_images=options)
    model = chat(server, tmp_path / "cache", mode="vlm")
    assert model.predict([q])[0].prediction == 1
    content = server.requests[0]["messages"][0]["content"]
    kinds = [part["type"] for part in content]
    assert kinds == ["text", "image_url", "text", "image_url", "text", "image_url", "text"]
    urls = [part["image_url"]["url"] for part in content if part["type"] == "image_url"]
    assert all(url.startswith("data:image/png;base64,") for url in urls)
    assert base64.b64decode(urls[1].split(",", 1)[1]) == options[0].read_bytes()
    assert content[-1]["text"].endswith("\nAnswer:")

    # Same prompt text, different image bytes: a different cache entry.
    Image.new("RGB", (12, 10), (1, 2, 3)).save(options[1])
    model.predict([q])
    assert server.hits == 2
    model.predict([q])
    assert server.hits == 2


def test_timeout_is_retried_then_recorded_as_failed_and_not_cached(server, tmp_path):
    q = question("t1", "Slow one [sleep] [ans:A]")
    model = chat(server, tmp_path / "cache", timeout=0.2, max_retries=1)
    prediction = model.predict([q])[0]
    assert prediction.prediction == -1 and "timeout" in prediction.error and "2 attempts" in prediction.error
    assert server.hits == 2
    model.predict([q])
    assert server.hits == 4


def test_a_drip_fed_reply_costs_the_timeout_not_its_length(server, tmp_path):
    """The headers come at once and the body a byte at a time: each attempt ends at the timeout."""
    q = question("d1", "Dripping [drip]")
    model = chat(server, tmp_path / "cache", timeout=0.5, max_retries=1)
    started = time.monotonic()
    prediction = model.predict([q])[0]
    assert time.monotonic() - started < 2.5  # two attempts of 0.5 s, not two replies of ~6 s
    assert prediction.prediction == -1 and "timeout" in prediction.error and "2 attempts" in prediction.error
    assert server.hits == 2


def test_garbage_is_retried_then_failed(server, tmp_path):
    model = chat(server, tmp_path / "cache", max_retries=2)
    flaky, garbage, overloaded = model.predict([
        question("g1", "Flaky [flaky] [ans:B]"),
        question("g2", "Always garbage [garbage]"),
        question("g3", "Busy [http500] [ans:A]"),
    ])
    assert flaky.prediction == 1 and flaky.error is None
    assert garbage.prediction == -1 and garbage.error.startswith("garbage reply") and "3 attempts" in garbage.error
    assert overloaded.prediction == 0
    assert server.hits == 2 + 3 + 2


def test_client_errors_are_not_retried(server, tmp_path):
    prediction = chat(server, tmp_path / "cache").predict([question("b1", "Bad [bad-request]")])[0]
    assert prediction.prediction == -1 and prediction.error.startswith("HTTP 400")
    assert server.hits == 1


def test_unparseable_answer_is_a_failed_sample(server, tmp_path):
    p = chat(server, tmp_path / "cache").predict([question("u1", "Hmm [raw:I cannot tell from here]")])[0]
    assert p.prediction == -1 and p.rule is None and p.error == "no answer found"
    assert p.raw == "I cannot tell from here"


def test_llm_mode_image_options_need_captions(server, tmp_path):
    options = (png(tmp_path, "a", (1, 1, 1)), png(tmp_path, "b", (2, 2, 2)))
    without = question("i1", "Pick [ans:A]", choice_images=options)
    with_captions = question("i2", "Pick [ans:B]", choice_images=options, choice_captions=("a moon", "a sun"))
    failed, answered = chat(server, tmp_path / "cache").predict([without, with_captions])
    assert failed.prediction == -1 and failed.error == "no text for image options"
    assert answered.prediction == 1
    assert server.hits == 1
    assert "(A) a moon\n(B) a sun" in server.requests[0]["messages"][0]["content"]


def test_api_key_comes_from_the_environment_and_is_never_recorded(server, tmp_path, monkeypatch):
    secret = "sk-test-0123456789abcdef"
    monkeypatch.setenv("STEMFORGE_TEST_KEY", secret)
    cache = tmp_path / "cache"
    model = build_model(
        f"openai?base_url={server.base_url}&model=fake-model&api_key_env=STEMFORGE_TEST_KEY&cache_dir={cache}"
    )
    predictions = model.predict([question("k1", "Key [ans:A]"), question("k2", "Bad [bad-request]")])
    assert server.headers[0]["Authorization"] == f"Bearer {secret}"
    recorded = repr(predictions) + repr(model) + model.name
    recorded += "".join(p.read_bytes().decode("latin-1") for p in cache.rglob("*") if p.is_file())
    assert secret not in recorded


def test_prompt_hash_is_independent_of_image_location(tmp_path):
    a = png(tmp_path, "x", (5, 5, 5))
    (tmp_path / "other").mkdir()
    b = png(tmp_path / "other", "y", (5, 5, 5))
    first = build_prompt(question("h", "Q", image=a), "m", "vlm", 16)
    second = build_prompt(question("h", "Q", image=b), "m", "vlm", 16)
    assert first.prompt_hash == second.prompt_hash and first.content_hash == second.content_hash
