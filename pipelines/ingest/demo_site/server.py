"""A real threaded HTTP/1.1 server for the demo quiz site (pages and images on request).

    with start_site(SiteConfig(questions=500, faults=True)) as running:
        requests.get(running.base_url + "robots.txt")
        running.requests()          # [(method, path?query, status), ...] as served

Every 200 response has a strong ``ETag`` and a ``Last-Modified``; conditional GETs
(``If-None-Match`` first, else ``If-Modified-Since``) get 304. Keep-alive is on.
``robots.txt`` disallows ``/members/`` and ``/print/`` (both linked from pages) and names
the sitemap index ``/sitemap.xml`` (one ``/sitemaps/pages.xml`` plus question sitemaps of
at most 50,000 URLs each, with ``lastmod``). URL shapes are documented in layouts.py and
generator.question_path.
"""

from __future__ import annotations

import hashlib
from collections import deque
import re
import socket
import threading
import time
from datetime import datetime, timezone
from functools import lru_cache
from email.utils import format_datetime, parsedate_to_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from pipelines.ingest.demo_site import layouts as L
from pipelines.ingest.demo_site.faults import Faults
from pipelines.ingest.demo_site.generator import BASE_DATE, DemoSite, SiteConfig, question_path, render_image

DISALLOWED_PREFIXES = ("/members/", "/print/")
SITEMAP_CHUNK = 50_000
REQUEST_LOG_LIMIT = 5_000_000

ROBOTS = """# Demo quiz sites
User-agent: *
Disallow: /members/
Disallow: /print/
Allow: /

Sitemap: {base}sitemap.xml
"""

RE_IXL_Q = re.compile(r"^/(science|math|engineering)/([a-z0-9-]+)/([a-z0-9-]+)/q/(\d+)$")
RE_IXL_SKILL = re.compile(r"^/(science|math|engineering)/([a-z0-9-]+)/([a-z0-9-]+)/$")
RE_IXL_GRADE = re.compile(r"^/(science|math|engineering)/([a-z0-9-]+)/$")
RE_IXL_SUBJECT = re.compile(r"^/(science|math|engineering)/$")
RE_PP_Q = re.compile(r"^/quiz-school/([a-z0-9-]+)/question-(\d+)\.html$")
RE_PP_SKILL = re.compile(r"^/quiz-school/([a-z0-9-]+)/$")
RE_PP_TOPIC = re.compile(r"^/quiz-school/topic/([a-z]+)/$")
RE_TP_Q = re.compile(r"^/en/trivia/([a-z0-9-]+)/(\d+)/$")
RE_TP_SKILL = re.compile(r"^/en/trivia/([a-z0-9-]+)/$")
RE_TP_TOPIC = re.compile(r"^/en/trivia/category/([a-z]+)/$")
RE_IMG = re.compile(r"^(?:/img/(\d+)/(p|\d)-([0-9a-f]{16})\.(png|jpg)"
                    r"|/quiz-school/images/(\d+)_(p|\d)_([0-9a-f]{16})\.(png|jpg)"
                    r"|/en/media/(\d+)/(p|\d)-([0-9a-f]{16})\.(png|jpg))$")
RE_SITEMAP_Q = re.compile(r"^/sitemaps/questions-(\d+)\.xml$")


@lru_cache(maxsize=4096)
def _cached_render(spec) -> bytes:
    return render_image(spec)


def _http_date(day: str) -> str:
    d = datetime.fromisoformat(day).replace(tzinfo=timezone.utc)
    return format_datetime(d, usegmt=True)


class SiteApp:
    """Turns a request path into (status, headers, body); no sockets here."""

    def __init__(self, config: SiteConfig):
        self.config = config
        self.site = DemoSite(config)
        self.faults = Faults(self.site)
        self.skills_by_slug = {sk.skill: sk for sk in self.site.skills()}
        self._attempts: dict[str, int] = {}
        self._lock = threading.Lock()
        self._present: list[int] | None = None

    def attempt(self, url: str) -> int:
        with self._lock:
            n = self._attempts.get(url, 0)
            self._attempts[url] = n + 1
            return n

    def present_indices(self) -> list[int]:
        if self._present is None:
            self._present = list(self.site.indices())
        return self._present

    # ---- routing -----------------------------------------------------------------------
    def question_index(self, path: str) -> int | None:
        """The question index a question URL path names (present or not), else None."""
        for rx, gi in ((RE_IXL_Q, 4), (RE_PP_Q, 2), (RE_TP_Q, 2)):
            m = rx.match(path)
            if m:
                i = int(m.group(gi))
                if 0 <= i < self.site.num_indices:
                    q_sk = self.site.skill_of(i)
                    if question_path(q_sk.layout, q_sk.subject, q_sk.grade, q_sk.skill, i) == path:
                        return i
                return None
        return None

    def handle(self, path: str, query: str, host: str):
        """Returns (status, headers dict, body bytes, last-modified day or None)."""
        base = f"http://{host}/"
        site = self.site
        rev_day = site.revision_date(site.config.revision)
        if path == "/robots.txt":
            return 200, {"Content-Type": "text/plain; charset=utf-8"}, ROBOTS.format(base=base).encode(), BASE_DATE.isoformat()
        if path == "/sitemap.xml":
            return 200, {"Content-Type": "application/xml"}, self.sitemap_index(base).encode(), rev_day
        if path == "/sitemaps/pages.xml":
            return 200, {"Content-Type": "application/xml"}, self.sitemap_pages(base).encode(), rev_day
        m = RE_SITEMAP_Q.match(path)
        if m:
            body = self.sitemap_questions(base, int(m.group(1)))
            if body is not None:
                return 200, {"Content-Type": "application/xml"}, body.encode(), rev_day
            return self.not_found()
        if path.startswith(DISALLOWED_PREFIXES):
            return 200, {"Content-Type": "text/html; charset=utf-8"}, L._simple_page("Members only", "<p>Please log in.</p>").encode(), rev_day
        m = RE_IMG.match(path)
        if m:
            g = [x for x in m.groups() if x is not None]
            return self.image(int(g[0]), g[1], g[2])
        i = self.question_index(path)
        if i is not None:
            if not site.is_present(i):
                return self.not_found()
            fault = self.faults.permanent(i)
            if fault == "redirect_loop":
                target = path if "loop=1" in query else path + "?loop=1"
                return 302, {"Location": target, "Content-Type": "text/html; charset=utf-8"}, b"<p>Moved</p>", None
            q = site.question(i)
            body = L.question_page(site, q).encode()
            if fault == "truncated_html":
                body = body[: len(body) * 55 // 100]
            return 200, {"Content-Type": "text/html; charset=utf-8"}, body, q.lastmod
        page = self.listing(path, query)
        if page is not None:
            return 200, {"Content-Type": "text/html; charset=utf-8"}, page.encode(), rev_day
        return self.not_found()

    def not_found(self):
        return 404, {"Content-Type": "text/html; charset=utf-8"}, L._simple_page("Not found", "<p>No such page.</p>").encode(), None

    def listing(self, path: str, query: str) -> str | None:
        site = self.site
        if path == "/":
            return L.home_page(site)
        if path == "/quiz-school/":
            return L.topic_page(site, "proprofs", "technology")
        if path == "/en/":
            return L.topic_page(site, "triviaplaza", "technology")
        m = RE_IXL_SUBJECT.match(path)
        if m:
            return L.subject_page(site, m.group(1))
        m = RE_IXL_GRADE.match(path)
        if m:
            return L.grade_page(site, m.group(1), m.group(2))
        m = RE_PP_TOPIC.match(path) or RE_TP_TOPIC.match(path)
        if m:
            return L.topic_page(site, "proprofs" if path.startswith("/quiz-school/") else "triviaplaza", m.group(1))
        sk = None
        m = RE_IXL_SKILL.match(path)
        if m:
            sk = site.skill_info(m.group(1), m.group(2), m.group(3))
        else:
            m = RE_PP_SKILL.match(path) or RE_TP_SKILL.match(path)
            if m:
                sk = self.skills_by_slug.get(m.group(1))
        if sk is None or L.skill_path(sk) != path:
            return None
        page = 1
        if query:
            values = parse_qs(query).get("page")
            if values:
                if not values[0].isdigit():
                    return None
                page = int(values[0])
        return L.skill_listing(site, sk, page)

    def image(self, i: int, slot: str, key: str):
        site = self.site
        if not site.is_present(i):
            return self.not_found()
        q = site.question(i)
        if slot == "p":
            spec = q.problem_image
        else:
            j = int(slot)
            spec = q.choice_images[j] if q.choice_images is not None and j < len(q.choice_images) else None
        if spec is None or spec.key != key:
            return self.not_found()
        fault = self.faults.permanent(i)
        headers = {"Content-Type": spec.mime_type, "Cache-Control": "max-age=86400"}
        if fault in ("missing_image", "corrupt_image") and self.faults.broken_image_slot(i) == slot:
            if fault == "missing_image":
                return self.not_found()
            headers["ETag"] = f'"img-{spec.key}-cut"'
            return 200, headers, lambda: _cached_render(spec)[: len(_cached_render(spec)) // 2], q.lastmod
        # the spec key names the exact bytes, so the ETag is known without drawing
        headers["ETag"] = f'"img-{spec.key}"'
        return 200, headers, lambda: _cached_render(spec), q.lastmod

    # ---- sitemaps --------------------------------------------------------------------------
    def sitemap_index(self, base: str) -> str:
        n = len(self.present_indices())
        chunks = max(1, (n + SITEMAP_CHUNK - 1) // SITEMAP_CHUNK)
        day = self.site.revision_date(self.site.config.revision)
        items = [f"<sitemap><loc>{base}sitemaps/pages.xml</loc><lastmod>{day}</lastmod></sitemap>"]
        items += [f"<sitemap><loc>{base}sitemaps/questions-{k}.xml</loc><lastmod>{day}</lastmod></sitemap>" for k in range(chunks)]
        return ('<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
                + "\n".join(items) + "\n</sitemapindex>\n")

    def listing_paths(self) -> list[str]:
        site = self.site
        paths = ["/", "/quiz-school/", "/en/"]
        seen_subjects: set = set()
        seen_grades: set = set()
        for sk in site.skills():
            if not site.skill_questions(sk):
                continue
            if sk.layout == "ixl":
                if sk.subject not in seen_subjects:
                    seen_subjects.add(sk.subject)
                    paths.append(f"/{sk.subject}/")
                if (sk.subject, sk.grade) not in seen_grades:
                    seen_grades.add((sk.subject, sk.grade))
                    paths.append(f"/{sk.subject}/{sk.grade}/")
            paths.append(L.skill_path(sk))
        paths += ["/quiz-school/topic/technology/", "/en/trivia/category/technology/"]
        return paths

    def sitemap_pages(self, base: str) -> str:
        day = self.site.revision_date(self.site.config.revision)
        items = [f"<url><loc>{base}{p[1:]}</loc><lastmod>{day}</lastmod></url>" for p in self.listing_paths()]
        return ('<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
                + "\n".join(items) + "\n</urlset>\n")

    def sitemap_questions(self, base: str, k: int) -> str | None:
        present = self.present_indices()
        chunk = present[k * SITEMAP_CHUNK: (k + 1) * SITEMAP_CHUNK]
        if not chunk:
            return None
        site = self.site
        out = ['<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">']
        for i in chunk:
            sk = site.skill_of(i)
            out.append(f"<url><loc>{base}{question_path(sk.layout, sk.subject, sk.grade, sk.skill, i)[1:]}</loc>"
                       f"<lastmod>{self.lastmod(i)}</lastmod></url>")
        out.append("</urlset>\n")
        return "\n".join(out)

    def lastmod(self, i: int) -> str:
        """A question's lastmod without building it (same value as DemoQuestion.lastmod)."""
        site = self.site
        if site.config.revision == 0:
            return site.revision_date(0)
        return site.question(i).lastmod


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "DemoQuizSite/1.0"
    sys_version = ""
    timeout = 30

    def log_message(self, format, *args):  # quiet
        pass

    def version_string(self):
        return self.server_version

    def do_HEAD(self):
        self._serve(head=True)

    def do_GET(self):
        self._serve(head=False)

    def _serve(self, head: bool):
        app: SiteApp = self.server.app  # type: ignore[attr-defined]
        parts = urlsplit(self.path)
        path, query = parts.path or "/", parts.query
        url = path + ("?" + query if query else "")
        attempt = app.attempt(url)
        status = 500
        try:
            fault = app.faults.transient(path, attempt)
            if fault is not None and fault[0] is None:
                time.sleep(fault[2])
                fault = None
            if fault is not None:
                status, headers, delay = fault
                body = f"<p>Error {status}</p>".encode()
                headers = {**headers, "Content-Type": "text/html; charset=utf-8"}
                self._send(status, headers, body, head)
                return
            status, headers, body, day = app.handle(path, query, self.headers.get("Host") or "127.0.0.1")
            if status == 200:
                etag = headers.get("ETag")
                if etag is None:
                    etag = headers["ETag"] = '"' + hashlib.sha1(body).hexdigest()[:20] + '"'
                if day:
                    headers["Last-Modified"] = _http_date(day)
                if self._not_modified(etag, day):
                    status = 304
                    self._send(304, {"ETag": etag, **({"Last-Modified": headers["Last-Modified"]} if day else {})}, b"", True)
                    return
            if callable(body):
                body = body()
            self._send(status, headers, body, head)
        except (BrokenPipeError, ConnectionResetError):
            raise
        except Exception as exc:  # a bug must not kill the connection thread silently
            status = 500
            self._send(500, {"Content-Type": "text/plain"}, f"internal error: {type(exc).__name__}: {exc}".encode(), head)
        finally:
            self.server.log.append((self.command, url, status))  # type: ignore[attr-defined]
            if path.startswith(DISALLOWED_PREFIXES):
                self.server.disallowed.append((self.command, url, status))  # type: ignore[attr-defined]

    def _not_modified(self, etag: str, day: str | None) -> bool:
        inm = self.headers.get("If-None-Match")
        if inm is not None:
            tags = [t.strip() for t in inm.split(",")]
            return "*" in tags or etag in tags or ("W/" + etag) in tags
        ims = self.headers.get("If-Modified-Since")
        if ims and day:
            try:
                since = parsedate_to_datetime(ims)
            except (TypeError, ValueError):
                return False
            if since.tzinfo is None:
                since = since.replace(tzinfo=timezone.utc)
            return datetime.fromisoformat(day).replace(tzinfo=timezone.utc) <= since
        return False

    def setup(self):
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _send(self, status: int, headers: dict, body: bytes, head: bool):
        # one write per response: headers and body together (no Nagle/delayed-ACK stalls)
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        if status != 304:
            self.send_header("Content-Length", str(len(body)))
        self._headers_buffer.append(b"\r\n")
        data = b"".join(self._headers_buffer)
        self._headers_buffer = []
        if not head and status != 304:
            data += body
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256


class RunningSite:
    """A demo site served from a background thread; use as a context manager or call stop()."""

    def __init__(self, config: SiteConfig, host: str = "127.0.0.1", port: int = 0):
        self.config = config
        self.app = SiteApp(config)
        self._server = _Server((host, port), _Handler)
        self._server.app = self.app  # type: ignore[attr-defined]
        self._server.log = deque(maxlen=REQUEST_LOG_LIMIT)  # type: ignore[attr-defined]
        self._server.disallowed = []  # type: ignore[attr-defined]
        self.host, self.port = self._server.server_address[:2]
        self.base_url = f"http://{self.host}:{self.port}/"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1},
                                        name=f"demo-site-{self.port}", daemon=True)
        self._thread.start()

    @property
    def site(self) -> DemoSite:
        return self.app.site

    def requests(self) -> list[tuple[str, str, int]]:
        """(method, path with query, status) of the requests served so far, in order
        (the last ``REQUEST_LOG_LIMIT`` of them)."""
        return list(self._server.log)  # type: ignore[attr-defined]

    def disallowed_requests(self) -> list[tuple[str, str, int]]:
        """Every request into a robots.txt-disallowed section (never truncated)."""
        return list(self._server.disallowed)  # type: ignore[attr-defined]

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> "RunningSite":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start_site(config: SiteConfig | None = None, host: str = "127.0.0.1", port: int = 0) -> RunningSite:
    """Serve the demo site in a background thread on ``host:port`` (0 = a free port)."""
    return RunningSite(config or SiteConfig(), host, port)


def serve_forever(config: SiteConfig | None = None, port: int = 8000, host: str = "127.0.0.1") -> None:
    """Serve in the foreground until interrupted (for ``stemforge site serve``)."""
    running = RunningSite(config or SiteConfig(), host, port)
    print(f"demo site on {running.base_url} (seed={running.config.seed}, questions={running.config.questions}, "
          f"faults={running.config.faults}, revision={running.config.revision})", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        running.stop()
