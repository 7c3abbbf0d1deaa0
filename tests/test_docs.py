"""The documentation: the README stays short and its links resolve; the MkDocs site builds with
--strict (a broken link, a missing anchor or a page left out of the nav fails it)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README_LIMIT = 12 * 1024


def test_readme_is_short_and_starts_with_the_two_commands():
    text = (ROOT / "README.md").read_text()
    assert len(text.encode()) <= README_LIMIT
    first_block = text.split("```")[1]
    assert "baleen demo" in first_block and "pytest" in first_block


def test_readme_links_resolve():
    text = (ROOT / "README.md").read_text()
    targets = [t for t in re.findall(r"\]\(([^)#]+)\)", text) if "://" not in t]
    assert targets, "the README links its documentation pages"
    missing = [t for t in targets if not (ROOT / t).exists()]
    assert not missing


def test_site_builds_strict(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    pages = {p.stem for p in (ROOT / "docs").glob("*.md")}
    built = {p.parent.name for p in (tmp_path / "site").glob("*/index.html")} | {"index"}
    assert pages <= built
