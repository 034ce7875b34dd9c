"""A scriptable HTTP site on 127.0.0.1 for crawler tests (a real server, no mocks).

Routes map a path to ``(site, request) -> Reply``; plain pages answer conditional GETs like a
real server, and every request is logged with its time and client port.
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable


LAST_MODIFIED = "Wed, 01 May 2024 10:00:00 GMT"


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    content_length: int | None = None  # declared length if it must differ from len(body)
    chunked_size: int = 0  # stream this many bytes with chunked encoding instead of body


@dataclass(frozen=True)
class Request:
    path: str
    headers: dict[str, str]
    at: float


@dataclass(frozen=True)
class Logged:
    path: str
    status: int
    at: float
    body_sent: bool
    headers: dict[str, str]
    client_port: int = 0


Route = Callable[["Site", Request], Reply]


def page(body: str | bytes, content_type: str = "text/html; charset=utf-8", etag: bool = True, last_modified: bool = True) -> Route:
    data = body.encode() if isinstance(body, str) else body

    def route(site: "Site", request: Request) -> Reply:
        tag = '"' + hashlib.sha256(data).hexdigest()[:16] + '"'
        headers = {"Content-Type": content_type}
        if etag:
            headers["ETag"] = tag
        if last_modified:
            headers["Last-Modified"] = LAST_MODIFIED
        if etag and request.headers.get("if-none-match") == tag:
            return Reply(304, headers={"ETag": tag})
        if not etag and last_modified and request.headers.get("if-modified-since") == LAST_MODIFIED:
            return Reply(304)
        return Reply(200, data, headers)

    return route


def redirect(location: str, status: int = 302) -> Route:
    return lambda site, request: Reply(status, headers={"Location": location})


def status(code: int, **headers: str) -> Route:
    return lambda site, request: Reply(code, b"error page", {"Content-Type": "text/html", **headers})


def sequence(*routes: Route) -> Route:
    """The n-th request gets the n-th route; later requests get the last one."""

    def route(site: "Site", request: Request) -> Reply:
        n = site.hits(request.path) - 1
        return routes[min(n, len(routes) - 1)](site, request)

    return route


class Site:
    def __init__(self, routes: dict[str, Route]):
        self.routes = dict(routes)
        self.log: list[Logged] = []
        self._lock = threading.Lock()
        self._hits: dict[str, int] = {}
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True
            wbufsize = 64 * 1024  # one send per response, flushed by handle_one_request

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                site._serve(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.handle_error = lambda request, address: None  # clients hanging up on refused bodies
        self.port = self.server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/"
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> "Site":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def hits(self, path: str) -> int:
        with self._lock:
            return self._hits.get(path, 0)

    def requested(self, path: str) -> list[Logged]:
        with self._lock:
            return [entry for entry in self.log if entry.path == path]

    def paths(self) -> set[str]:
        with self._lock:
            return {entry.path for entry in self.log}

    def bodies_sent(self) -> list[str]:
        with self._lock:
            return [entry.path for entry in self.log if entry.status == 200 and entry.body_sent]

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        path = handler.path
        request = Request(path, {k.lower(): v for k, v in handler.headers.items()}, time.monotonic())
        with self._lock:
            self._hits[path] = self._hits.get(path, 0) + 1
        route = self.routes.get(path)
        reply = route(self, request) if route else Reply(404, b"not found", {"Content-Type": "text/plain"})
        with self._lock:
            self.log.append(Logged(path, reply.status, request.at, bool(reply.body or reply.chunked_size), request.headers,
                                   handler.client_address[1]))
        try:
            handler.send_response(reply.status)
            for name, value in reply.headers.items():
                handler.send_header(name, value)
            if reply.chunked_size:
                handler.send_header("Transfer-Encoding", "chunked")
                handler.end_headers()
                block = b"x" * 65536
                sent = 0
                while sent < reply.chunked_size:
                    handler.wfile.write(b"%x\r\n%s\r\n" % (len(block), block))
                    sent += len(block)
                handler.wfile.write(b"0\r\n\r\n")
                return
            handler.send_header("Content-Length", str(reply.content_length if reply.content_length is not None else len(reply.body)))
            handler.end_headers()
            handler.wfile.write(reply.body)
            if reply.content_length is not None:  # a lying Content-Length: hang up mid-body
                handler.close_connection = True
        except (BrokenPipeError, ConnectionResetError):
            handler.close_connection = True


def html(title: str, links: list[str] = (), images: list[str] = (), extra: str = "") -> str:
    anchors = "".join(f'<li><a href="{href}">{href}</a></li>' for href in links)
    pictures = "".join(f'<img src="{src}" alt="">' for src in images)
    return f"<!doctype html><html><head><title>{title}</title>{extra}</head><body><h1>{title}</h1><ul>{anchors}</ul>{pictures}</body></html>"
