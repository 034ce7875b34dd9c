"""The one HTTP retry policy (pipelines/http.py) used by the crawler, the probe and the chat client."""

from __future__ import annotations

import json
import random
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


from pipelines.evaluation.models.base import EvalQuestion
from pipelines.evaluation.models.openai_chat import OpenAIChatModel
from pipelines.http import RetryPolicy, retryable_status
from pipelines.ingest.crawl.config import CrawlConfig
from pipelines.ingest.crawl.probe import probe_policy


def test_which_answers_are_retried():
    assert [s for s in (200, 304, 400, 404, 408, 425, 429, 500, 503, 599) if retryable_status(s)] == [408, 425, 429, 500, 503, 599]


def test_retry_delay_honours_retry_after_backs_off_and_gives_up():
    policy = RetryPolicy(retries=3, backoff=1.0, backoff_cap=3.0, max_retry_after=10.0, max_total_wait=12.0)
    rng = random.Random(1)
    assert policy.retry_delay({"Retry-After": "7"}, 1) == 7.0
    assert policy.retry_delay(4.0, 1) == 4.0
    assert policy.retry_delay({"Retry-After": "11"}, 1) is None  # over max_retry_after: give up, do not stall
    for attempt, cap in ((1, 1.0), (2, 2.0), (3, 3.0)):
        delays = [policy.retry_delay(None, attempt, rng=rng) for _ in range(200)]
        assert cap / 2 <= min(delays) and max(delays) <= cap and len(set(delays)) > 1  # jittered
    assert policy.retry_delay(None, 4) is None  # retries used up
    assert policy.retry_delay({"Retry-After": "7"}, 2, waited=6.0) is None  # over max_total_wait
    assert policy.retry_delay({}, 1, rng=rng) <= 1.0  # no Retry-After: the backoff


def test_the_crawler_probe_and_chat_client_share_the_policy():
    config = CrawlConfig(base_url="http://example.org/", max_retries=5, backoff_base=0.25, backoff_cap=8.0,
                         max_retry_after=60.0, timeout=9.0)
    policy = config.retry_policy
    assert (policy.retries, policy.backoff, policy.backoff_cap, policy.max_retry_after, policy.timeout) == (5, 0.25, 8.0, 60.0, 9.0)
    assert probe_policy(config).retries == 5 and probe_policy(config).max_retry_after <= 5.0
    chat = OpenAIChatModel("http://127.0.0.1:9/v1", "m", max_retries=2, backoff=0.5, timeout=7)
    assert (chat.policy.retries, chat.policy.backoff, chat.policy.timeout) == (2, 0.5, 7.0)


@contextmanager
def flaky_server(answers: list[tuple[int, dict]]):
    """Answers the given (status, headers) in turn, then 200 ``ok``; records request times."""
    seen: list[float] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.answer(b"ok")

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.answer(json.dumps({"choices": [{"message": {"content": "Answer: B"}}]}).encode())

        def answer(self, ok: bytes) -> None:
            seen.append(time.monotonic())
            status, headers = answers[len(seen) - 1] if len(seen) <= len(answers) else (200, {})
            body = ok if status == 200 else b"busy"
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", seen
    finally:
        server.shutdown()
        server.server_close()


def test_a_policy_session_retries_transient_answers_and_honours_retry_after():
    policy = RetryPolicy(retries=3, backoff=0.01, backoff_cap=0.02, max_retry_after=5.0, timeout=5.0)
    with flaky_server([(503, {}), (429, {"Retry-After": "1"})]) as (url, seen):
        with policy.session() as session:
            response = session.get(url, timeout=policy.timeout)
        assert (response.status_code, response.text, len(seen)) == (200, "ok", 3)
        assert seen[2] - seen[1] >= 0.95  # waited the Retry-After
        assert len(response.raw.retries.history) == 2


def test_a_policy_session_gives_up_after_its_retries_with_the_last_answer():
    policy = RetryPolicy(retries=2, backoff=0.01, backoff_cap=0.02, timeout=5.0)
    with flaky_server([(503, {})] * 5) as (url, seen):
        with policy.session() as session:
            response = session.get(url, timeout=policy.timeout)
        assert (response.status_code, len(seen)) == (503, 3)


def test_the_chat_client_waits_what_retry_after_asks_and_gives_up_on_a_longer_wait(tmp_path):
    question = EvalQuestion(question_id="q1", subject="science", grade="grade-2", skill="animals", split="test",
                            problem="Which?", problem_image=None, choices=("cat", "dog"), choice_images=None,
                            answer_idx=-1, caption=None, choice_captions=None)
    with flaky_server([(429, {"Retry-After": "1"})]) as (url, seen):
        model = OpenAIChatModel(url + "v1", "m", max_retries=2, backoff=0.01, workers=1, cache_dir=tmp_path / "a")
        (prediction,) = model.predict([question])
        assert (prediction.prediction, len(seen)) == (1, 2)
        assert seen[1] - seen[0] >= 0.95
    with flaky_server([(503, {"Retry-After": "3600"})]) as (url, seen):
        model = OpenAIChatModel(url + "v1", "m", max_retries=2, backoff=0.01, workers=1, cache_dir=tmp_path / "b")
        (prediction,) = model.predict([question])
        assert (prediction.prediction, prediction.error, len(seen)) == (-1, "HTTP 503 (1 attempts)", 1)
