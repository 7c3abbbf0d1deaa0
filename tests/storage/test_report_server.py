"""`baleen reports serve`: the store's reports over http, read-only, at the URLs report links use."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request

import pytest

from baleen_storage.report_server import report_server, report_url, serving_port


@pytest.fixture
def served(tmp_path, monkeypatch):
    """A report server on a free port over a reports/ tree, and the base URL links then use."""
    root = tmp_path / "reports"
    (root / "run1" / "evaluation" / "traces").mkdir(parents=True)
    (root / "run1" / "evaluation" / "traces" / "baleen-u 1.html").write_text("<h1>trace</h1>")
    (tmp_path / "secret.txt").write_text("outside the reports")
    server = report_server(root, port=0)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("BALEEN_REPORTS_URL", base)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root
    server.shutdown()
    server.server_close()


def _get(url: str, method: str = "GET") -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as err:
        return err.code, b""


def test_a_report_link_opens_the_file(served):
    url = report_url(served, served / "run1" / "evaluation" / "traces" / "baleen-u 1.html")
    assert url.endswith("/run1/evaluation/traces/baleen-u%201.html")
    assert _get(url) == (200, b"<h1>trace</h1>")


def test_nothing_outside_the_reports_and_no_writes(served):
    base = report_url(served, served)
    assert _get(base + "/../secret.txt")[0] == 404 and _get(base + "/%2e%2e/secret.txt")[0] == 404
    assert _get(base + "/run1/evaluation/traces/new.html", method="PUT")[0] == 501
    assert _get(base + "/run1/evaluation/traces/baleen-u%201.html", method="DELETE")[0] == 501


def test_the_default_port_is_where_links_point(monkeypatch):
    monkeypatch.delenv("BALEEN_REPORTS_URL", raising=False)
    assert serving_port() == 8765
    monkeypatch.setenv("BALEEN_REPORTS_URL", "http://127.0.0.1:9100/")
    assert serving_port() == 9100


def test_baleen_reports_serve_serves_the_stores_reports(tmp_path):
    import re
    import subprocess

    from helpers import BALEEN_CLI

    trace = tmp_path / "store" / "reports" / "run1" / "evaluation" / "traces" / "baleen-u1.html"
    trace.parent.mkdir(parents=True)
    trace.write_text("<h1>u1</h1>")
    process = subprocess.Popen([BALEEN_CLI, "reports", "serve", "--store", str(tmp_path / "store"), "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()  # "serving <reports dir> at http://127.0.0.1:<port>/ ..."
        url = re.search(r"http://127\.0\.0\.1:\d+/", line)
        assert url and str(tmp_path / "store" / "reports") in line, line
        assert _get(url.group(0) + "run1/evaluation/traces/baleen-u1.html") == (200, b"<h1>u1</h1>")
    finally:
        process.terminate()
        process.wait(timeout=30)
