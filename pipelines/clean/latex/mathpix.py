"""Optional adapter to the Mathpix OCR API, for formulas that only exist as images.

Off by default: a client without credentials (arguments or the environment variables
MATHPIX_APP_ID / MATHPIX_APP_KEY) refuses to run with ``MathpixNotConfigured``. The key is
sent only in the ``app_key`` header; it never appears in errors, logs or ``repr``.

``image_to_latex`` posts the image as a base64 data URL to ``POST {base_url}/v3/text`` and
returns Mathpix's ``text`` (Mathpix Markdown: inline math in ``\\( ... \\)``, the style the
offline converter in ``pipelines.clean.latex.convert`` produces). HTTP 429 and 5xx answers and connection
failures are retried with exponential backoff (honouring ``Retry-After``); every failure
surfaces as a ``MathpixError`` with a one-line message.
"""

from __future__ import annotations

import base64
import logging
import os
import time

import requests

__all__ = ["MathpixClient", "MathpixError", "MathpixNotConfigured"]

log = logging.getLogger(__name__)

_MAX_RETRY_AFTER_SECONDS = 30.0


class MathpixError(ValueError):
    """A Mathpix request failed; the message is one line and never contains the key."""


class MathpixNotConfigured(MathpixError):
    """No app id / app key: the Mathpix adapter is disabled."""


def _one_line(text: str, limit: int = 200) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _image_mime_type(data: bytes) -> str:
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    raise MathpixError("image is not PNG, JPEG, GIF or WebP")


class MathpixClient:
    def __init__(
        self,
        app_id: str | None = None,
        app_key: str | None = None,
        base_url: str = "https://api.mathpix.com",
        *,
        timeout: float = 30.0,
        max_retries: int = 3,
        backoff_seconds: float = 1.0,
        session: requests.Session | None = None,
    ) -> None:
        self.app_id = app_id if app_id is not None else os.environ.get("MATHPIX_APP_ID") or None
        self._app_key = app_key if app_key is not None else os.environ.get("MATHPIX_APP_KEY") or None
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff_seconds = backoff_seconds
        self._session = session or requests.Session()

    @property
    def enabled(self) -> bool:
        return bool(self.app_id and self._app_key)

    def __repr__(self) -> str:
        return f"MathpixClient(app_id={self.app_id!r}, base_url={self.base_url!r}, enabled={self.enabled})"

    def image_to_latex(self, png_bytes: bytes) -> str:
        """The Mathpix-style text (formulas in ``\\( ... \\)``) recognized in one image."""
        if not self.enabled:
            raise MathpixNotConfigured(
                "Mathpix is disabled: set MATHPIX_APP_ID and MATHPIX_APP_KEY (or pass app_id/app_key)"
            )
        if not isinstance(png_bytes, (bytes, bytearray)) or not png_bytes:
            raise MathpixError("image must be non-empty bytes")
        data = bytes(png_bytes)
        src = f"data:{_image_mime_type(data)};base64," + base64.b64encode(data).decode("ascii")
        body = {"src": src, "formats": ["text"], "math_inline_delimiters": ["\\(", "\\)"]}
        answer = self._post("/v3/text", body)
        if answer.get("error"):
            info = answer.get("error_info") or {}
            detail = info.get("id") or info.get("message") or ""
            raise MathpixError(self._redact(_one_line(
                f"Mathpix error: {answer['error']}" + (f" ({detail})" if detail else ""))))
        text = answer.get("text")
        if not isinstance(text, str):
            raise MathpixError("Mathpix answer has no text field")
        return text

    def _post(self, path: str, body: dict) -> dict:
        url = self.base_url + path
        headers = {"app_id": self.app_id, "app_key": self._app_key, "Content-Type": "application/json"}
        attempts = self.max_retries + 1
        for attempt in range(1, attempts + 1):
            delay = self.backoff_seconds * (2 ** (attempt - 1))
            try:
                response = self._session.post(url, json=body, headers=headers, timeout=self.timeout)
            except requests.RequestException as exc:
                reason = f"{type(exc).__name__}"
                if attempt == attempts:
                    raise MathpixError(f"Mathpix request to {url} failed after {attempts} attempts: {reason}") from None
                log.warning("Mathpix request failed (%s), retrying in %.1fs", reason, delay)
                time.sleep(delay)
                continue
            retryable = response.status_code == 429 or response.status_code >= 500
            if retryable and attempt < attempts:
                retry_after = response.headers.get("Retry-After", "")
                if retry_after.replace(".", "", 1).isdigit():
                    delay = min(float(retry_after), _MAX_RETRY_AFTER_SECONDS)
                log.warning("Mathpix answered HTTP %d, retrying in %.1fs", response.status_code, delay)
                time.sleep(delay)
                continue
            if response.status_code != 200:
                raise MathpixError(_one_line(
                    f"Mathpix answered HTTP {response.status_code}"
                    + (f" after {attempt} attempts" if attempt > 1 else "")
                    + f": {self._error_text(response)}"
                ))
            try:
                answer = response.json()
            except ValueError:
                raise MathpixError("Mathpix answer is not JSON") from None
            if not isinstance(answer, dict):
                raise MathpixError("Mathpix answer is not a JSON object")
            return answer
        raise AssertionError("unreachable")

    def _error_text(self, response: requests.Response) -> str:
        try:
            answer = response.json()
        except ValueError:
            answer = None
        if isinstance(answer, dict) and answer.get("error"):
            text = str(answer["error"])
        else:
            text = response.text[:200] or response.reason or ""
        return self._redact(_one_line(text))

    def _redact(self, text: str) -> str:
        return text.replace(self._app_key, "***") if self._app_key else text
