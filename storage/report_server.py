"""A read-only HTTP server over the store's ``reports/`` directory (``baleen reports serve``).

Browsers refuse ``file://`` links from an ``http://`` page such as the Prefect UI, so the link
artifacts of a run point at this server instead: the HTML traces and the plots open with one click
while it runs. It binds to localhost by default and answers GET and HEAD only (the standard
library's handler has no other verbs, so nothing can be written through it).
"""

from __future__ import annotations

import os
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote, urlsplit

#: Where `baleen reports serve` listens unless told otherwise, and so where report links point.
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765

#: Set it when the server runs elsewhere (another port or host, behind a proxy): links use it.
REPORTS_URL_ENV = "BALEEN_REPORTS_URL"


def reports_url() -> str:
    """The base URL that report links point at: ``$BALEEN_REPORTS_URL`` or the default server's."""
    return os.environ.get(REPORTS_URL_ENV, f"http://{DEFAULT_HOST}:{DEFAULT_PORT}").rstrip("/")


def serving_port() -> int:
    """The port to serve on by default: the one report links point at."""
    return urlsplit(reports_url()).port or DEFAULT_PORT


def report_url(reports_root: Path, path: Path) -> str:
    """The http:// URL of ``path`` (a file under ``reports_root``) on the report server."""
    return reports_url() + "/" + quote(path.resolve().relative_to(reports_root.resolve()).as_posix())


class _QuietHandler(SimpleHTTPRequestHandler):
    """The standard handler without a log line on stderr per request (the CLI prints the URL once)."""

    def log_message(self, format: str, *args) -> None:  # noqa: A002 (the base class's name)
        pass


def report_server(reports_root: Path, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> ThreadingHTTPServer:
    """A server (not yet serving: call ``serve_forever``) of the files under ``reports_root``;
    port 0 picks a free one (``server.server_address`` says which)."""
    reports_root.mkdir(parents=True, exist_ok=True)
    return ThreadingHTTPServer((host, port), partial(_QuietHandler, directory=str(reports_root)))
