"""The Mathpix adapter against a fake Mathpix server on 127.0.0.1."""

from __future__ import annotations

import base64
import io
import json
import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from PIL import Image

from pipelines.clean.latex.mathpix import MathpixClient, MathpixError, MathpixNotConfigured

APP_ID = "test-app"
APP_KEY = "s3cret-key-0123456789"


def _png() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 4), (255, 255, 255)).save(buffer, format="PNG")
    return buffer.getvalue()


class FakeMathpix:
    """Answers POST /v3/text with a scripted list of (status, body, headers)."""

    def __init__(self, script):
        self.script = list(script)
        self.requests: list[dict] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                fake.requests.append({
                    "path": self.path,
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                    "body": self.rfile.read(length),
                })
                status, body, headers = fake.script.pop(0) if fake.script else (500, {"error": "script exhausted"}, {})
                payload = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def _client(url: str, **kwargs) -> MathpixClient:
    return MathpixClient(APP_ID, APP_KEY, base_url=url, backoff_seconds=0.0, timeout=5, **kwargs)


def test_sends_credentials_and_image_as_data_url():
    png = _png()
    with FakeMathpix([(200, {"text": r"\( x^{2}+1 \)", "confidence": 0.99}, {})]) as fake:
        assert _client(fake.url).image_to_latex(png) == r"\( x^{2}+1 \)"
    (request,) = fake.requests
    assert request["path"] == "/v3/text"
    assert request["headers"]["app_id"] == APP_ID
    assert request["headers"]["app_key"] == APP_KEY
    body = json.loads(request["body"])
    prefix = "data:image/png;base64,"
    assert body["src"].startswith(prefix)
    assert base64.b64decode(body["src"][len(prefix):]) == png


def test_retries_on_429_and_5xx_then_succeeds():
    script = [
        (429, {"error": "rate limited"}, {"Retry-After": "0"}),
        (503, b"unavailable", {}),
        (200, {"text": r"\( \frac{1}{2} \)"}, {}),
    ]
    with FakeMathpix(script) as fake:
        assert _client(fake.url, max_retries=3).image_to_latex(_png()) == r"\( \frac{1}{2} \)"
    assert len(fake.requests) == 3


def test_gives_up_after_retries_with_one_line_error():
    with FakeMathpix([(500, b"boom\nline two\ntraceback...", {})] * 3) as fake:
        with pytest.raises(MathpixError) as info:
            _client(fake.url, max_retries=2).image_to_latex(_png())
    assert len(fake.requests) == 3
    message = str(info.value)
    assert "\n" not in message and "HTTP 500" in message and "3 attempts" in message
    assert APP_KEY not in message


def test_client_error_is_not_retried_and_key_never_leaks(caplog):
    answer = {"error": f"invalid credentials for key {APP_KEY}"}
    with FakeMathpix([(401, answer, {}), (200, {"text": "never"}, {})]) as fake:
        client = _client(fake.url)
        with caplog.at_level(logging.DEBUG), pytest.raises(MathpixError) as info:
            client.image_to_latex(_png())
    assert len(fake.requests) == 1
    assert "HTTP 401" in str(info.value) and "\n" not in str(info.value)
    assert APP_KEY not in str(info.value)
    assert APP_KEY not in repr(client)
    assert APP_KEY not in caplog.text


def test_error_in_a_200_answer_is_reported():
    with FakeMathpix([(200, {"error": "Image not found", "error_info": {"id": "image_no_content"}}, {})]) as fake:
        with pytest.raises(MathpixError, match="Image not found .image_no_content."):
            _client(fake.url).image_to_latex(_png())


def test_disabled_without_credentials(monkeypatch):
    monkeypatch.delenv("MATHPIX_APP_ID", raising=False)
    monkeypatch.delenv("MATHPIX_APP_KEY", raising=False)
    client = MathpixClient()
    assert not client.enabled
    with pytest.raises(MathpixNotConfigured, match="MATHPIX_APP_ID"):
        client.image_to_latex(_png())


def test_reads_credentials_from_environment(monkeypatch):
    monkeypatch.setenv("MATHPIX_APP_ID", "env-app")
    monkeypatch.setenv("MATHPIX_APP_KEY", "env-key")
    with FakeMathpix([(200, {"text": "ok"}, {})]) as fake:
        client = MathpixClient(base_url=fake.url, backoff_seconds=0.0)
        assert client.enabled and client.image_to_latex(_png()) == "ok"
    assert fake.requests[0]["headers"]["app_id"] == "env-app"
    assert fake.requests[0]["headers"]["app_key"] == "env-key"


def test_connection_failure_is_one_line():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(MathpixError) as info:
        _client(f"http://127.0.0.1:{port}", max_retries=1).image_to_latex(_png())
    assert "2 attempts" in str(info.value) and "\n" not in str(info.value)


def test_rejects_bytes_that_are_not_an_image():
    with pytest.raises(MathpixError, match="not PNG"):
        _client("http://127.0.0.1:9").image_to_latex(b"hello")
