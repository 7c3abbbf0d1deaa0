"""The evaluation report as a user sees it in the Prefect UI, checked in a real browser.

Starts a Prefect server (``prefect server start`` on a free port, its own PREFECT_HOME) and the
report server (``baleen reports serve``'s, on another free port, which report links then point
at), runs the whole pipeline on the flow tests' tiny demo world, then opens in headless Chromium:

1. the report artifact: its DOM must hold the three plots as decoded ``data:image/png`` images and
   a link to each worst claim's trace artifact;
2. the worst claim's trace artifact, reached by the report's first trace link;
3. that claim's HTML trace on the report server, reached by the report's first HTML link;

and takes a screenshot of each (full pages, tall windows). Needs ``chromium`` (Debian:
``apt-get install chromium``); takes a few minutes on two cores (training the tiny models).

    python benchmarks/ui_screenshots.py --out /work/screenshots
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from html.parser import HTMLParser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # helpers: the flow tests' tiny world, ports and process groups

from helpers import free_port, stop_process_group  # noqa: E402

#: The flow tests' small budgets (tests/flows/conftest.py): the tiny models still train, in minutes.
CONFIG = (
    "retriever: {device: cpu}\nindex: {batch_size: 16}\nlabels: {rounds: 2, round0: flipr, depth: 50}\n"
    "training: {flipr: {epochs: 2, batch_size: 8}, stage1: {epochs: 2, max_examples: 40}, stage2: {epochs: 2, max_examples: 40},"
    " reader: {epochs: 2, batch_size: 8, max_examples: 20}}\n"
    "evaluation: {depth: 12, worst_claims: 3, bootstrap: 200}\n"
)


def wait_for(url: str, timeout: float, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{process.args[0]} exited (rc {process.returncode}) before {url} answered")
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            time.sleep(1)
    raise TimeoutError(f"{url} did not answer in {timeout:.0f} s")


def start_prefect_server(home: Path, port: int, log: Path) -> subprocess.Popen:
    """``prefect server start`` in a session of its own, with its own home (SQLite database). The
    UI asks the server where the API is, and the server answers port 4200 unless told otherwise."""
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1"}
    env |= {"PREFECT_UI_API_URL": f"http://127.0.0.1:{port}/api"}
    env.pop("PREFECT_API_URL", None)
    prefect = str(Path(sys.executable).parent / "prefect")
    return subprocess.Popen([prefect, "server", "start", "--host", "127.0.0.1", "--port", str(port)], env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if not found:
        raise SystemExit("no chromium on PATH (Debian: apt-get install chromium)")
    return found


def browse(url: str, *, screenshot: Path | None = None, height: int = 2000, budget_ms: int = 20000) -> str:
    """Open ``url`` in headless Chromium, let the UI render (virtual time), return the DOM;
    with ``screenshot``, save the window (1400 × ``height``) as a PNG instead."""
    args = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--virtual-time-budget={budget_ms}", f"--window-size=1400,{height}"]
    args += [f"--screenshot={screenshot}"] if screenshot else ["--dump-dom"]
    result = subprocess.run([*args, url], capture_output=True, text=True, timeout=180)
    if screenshot is not None and not screenshot.exists():
        raise RuntimeError(f"no screenshot of {url}: {result.stderr[-2000:]}")
    return result.stdout


class _Rendered(HTMLParser):
    """What a rendered page shows: its images' sources and its links' targets."""

    def __init__(self) -> None:
        super().__init__()
        self.images: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "img" and found.get("src"):
            self.images.append(found["src"])
        if tag == "a" and found.get("href"):
            self.links.append(found["href"])


def rendered(dom: str) -> _Rendered:
    page = _Rendered()
    page.feed(dom)
    return page


def run_pipeline(work: Path) -> dict:
    """The whole pipeline on the tiny world, reporting to the server at $PREFECT_API_URL; where
    ``work`` holds a finished one (``--reuse``), only the evaluation, which reuses every verified
    claim and publishes the report again (a minute instead of twenty on two cores)."""
    from baleen_core.demo_world import write_demo_world
    from baleen_flows.evaluation import evaluation_flow
    from baleen_flows.pipeline import pipeline_flow
    from helpers import TINY

    config = work / "config.yaml"
    if config.exists() and any((work / "store" / "reports").glob("*/evaluation/report.md")):
        return {f"evaluation/{key}": ref for key, ref in evaluation_flow(str(config)).items()}
    world = write_demo_world(work / "demo", TINY)
    config.write_text(f"store_root: {work / 'store'}\n{CONFIG}")
    return pipeline_flow(str(world), str(config))


def latest_artifact(key: str):
    """The newest artifact under ``key``: this run's (the server is this script's own)."""
    from prefect.artifacts import Artifact

    artifact = Artifact.get(key, _sync=True)
    if artifact is None:
        raise AssertionError(f"no {key!r} artifact was published")
    return artifact


def check_report_page(url: str, trace_id) -> tuple[list[str], list[str]]:
    """The rendered report's plots (must decode to PNGs), its links to the trace artifact
    ``trace_id`` (the UI's own links to artifacts aside) and to HTML pages."""
    import base64

    page = rendered(browse(url))
    if any(not src.startswith("data:") and src.endswith(".png") for src in page.images):
        raise AssertionError(f"the rendered report points at PNG files the browser cannot reach: {page.images}")
    plots = [src for src in page.images if src.startswith("data:image/png;base64,")]
    if len(plots) != 3 or not all(base64.b64decode(src.split(",", 1)[1]).startswith(b"\x89PNG\r\n\x1a\n") for src in plots):
        raise AssertionError(f"the rendered report shows {len(plots)} PNG plots, not 3: {[s[:60] for s in page.images]}")
    traces = [href for href in page.links if href.endswith(f"/artifacts/artifact/{trace_id}")]
    pages = [href for href in page.links if href.endswith(".html")]
    if not traces or not pages:
        raise AssertionError(f"the rendered report has no trace links: {page.links}")
    return traces, pages


def crop_to_end(screenshot: Path, out: Path, height: int = 2400) -> None:
    """The last ``height`` pixels of the page's content (the plots and the trace links): the rows
    down to the last one that differs from the page's background in the middle of the page (the
    sidebar's decoration and the details column aside)."""
    import numpy as np
    from PIL import Image

    image = Image.open(screenshot).convert("RGB")
    pixels = np.asarray(image).astype(int)
    background = pixels[-1, image.width // 2]
    middle = pixels[:, int(image.width * 0.3) : int(image.width * 0.65)]
    content = np.nonzero((np.abs(middle - background).sum(axis=2) > 30).any(axis=1))[0]
    end = int(content[-1]) + 40 if len(content) else image.height
    image.crop((0, max(0, end - height), image.width, min(end, image.height))).save(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("/work/screenshots"), help="where the screenshots go (outside the repository)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary store and Prefect home")
    parser.add_argument("--reuse", type=Path, help="a directory a --keep run left: rerun only the evaluation there")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.reuse or Path(tempfile.mkdtemp(prefix="baleen-ui-"))
    prefect_port, reports_port = free_port(), free_port()
    server = start_prefect_server(work / "prefect-home", prefect_port, work / "prefect-server.log")
    try:
        ui = f"http://127.0.0.1:{prefect_port}"
        wait_for(f"{ui}/api/health", 180, server)
        # before Prefect is imported here: this process's runs report to that server, and report
        # links point at the report server started below
        os.environ.update(PREFECT_API_URL=f"{ui}/api", BALEEN_REPORTS_URL=f"http://127.0.0.1:{reports_port}", BALEEN_HOME=str(work / "home"))
        from baleen_core.runtime import apply_runtime_defaults

        apply_runtime_defaults()
        from baleen_storage.report_server import report_server

        reports = report_server(work / "store" / "reports", port=reports_port)
        threading.Thread(target=reports.serve_forever, daemon=True).start()

        started = time.perf_counter()
        run_pipeline(work)
        print(f"pipeline: {time.perf_counter() - started:.0f} s", flush=True)
        report, worst = latest_artifact("evaluation-dev-report"), latest_artifact("evaluation-dev-worst-1")

        # the server's default UI (under /v2) and the old one (at the root) both show the plots
        report_url, old_ui_report_url = f"{ui}/v2/artifacts/artifact/{report.id}", f"{ui}/artifacts/artifact/{report.id}"
        traces, pages = check_report_page(report_url, worst.id)
        check_report_page(old_ui_report_url, worst.id)
        shots = {
            "report-top.png": (report_url, 2000),
            "report-full.png": (report_url, 9000),  # tables, then the three plots, then the trace links
            "report-full-old-ui.png": (old_ui_report_url, 9000),
            "trace-artifact.png": (traces[0], 3000),  # the first trace link of the report
            "trace-html.png": (pages[0], 3000),  # the first HTML link, on the report server
        }
        for name, (url, height) in shots.items():
            browse(url, screenshot=args.out / name, height=height)
        crop_to_end(args.out / "report-full.png", args.out / "report-plots.png")
        shots["report-plots.png"] = (report_url, 0)
        summary = {
            "prefect_ui": ui,
            "report_artifact": report_url,
            "report_bytes": len(report.data),
            "trace_links": traces,
            "html_links": pages,
            "screenshots": {name: str(args.out / name) for name in shots},
        }
        (args.out / "ui_screenshots.json").write_text(json.dumps(summary, indent=2))
        print(json.dumps(summary, indent=2))
        reports.shutdown()
    finally:
        stop_process_group(server)
        if not args.keep and not args.reuse:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept {work}")


if __name__ == "__main__":
    main()
