"""Where the benchmarks find hover-mini: ``../shared/benchmarks/hover-mini`` beside the checkout
(the layout CI and the guide use), or the folder given with ``--hover-mini``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

DEFAULT_HOVER_MINI = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "hover-mini"


def add_hover_mini_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--hover-mini", type=Path, default=DEFAULT_HOVER_MINI,
        help=f"the hover-mini pack (default: {DEFAULT_HOVER_MINI})",
    )


def require_hover_mini(path: Path, needs: str = ".") -> Path:
    """The pack, or exit with one line saying where it was looked for; ``needs`` is a file or folder
    inside it that the benchmark reads (the pack's folder itself by default)."""
    if not (path / needs).exists():
        sys.exit(f"hover-mini not found at {path}; pass --hover-mini")
    return path


def hop_counts(text: str) -> list[int]:
    """An argparse type: hop counts given as "4" or "3,4" (``search.fusion_hop_counts``)."""
    try:
        counts = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"hop counts are whole numbers separated by commas, e.g. 4 or 3,4; got {text!r}") from None
    if min(counts) < 1:
        raise argparse.ArgumentTypeError(f"a hop count is at least 1; got {text!r}")
    return counts


def add_split_option(parser: argparse.ArgumentParser) -> None:
    """``--split``, for a benchmark that reads a training benchmark's ``--work`` folder."""
    from baleen_core.held_out import DEV_SPLIT, HELD_OUT_SPLIT

    parser.add_argument(
        "--split", choices=[HELD_OUT_SPLIT, DEV_SPLIT], default=None,
        help="what the work folder's dev claims are, for the results file (default: what the folder recorded; needed only for a folder made before "
        "that was recorded, and never against it)",
    )


def work_split(work: Path, given: str | None) -> str:
    """What a training benchmark's work folder recorded its dev claims to be, which ``--split``
    (``given``) may only repeat; or exit with one line saying why not."""
    from baleen_core.held_out import agreed_split, recorded_split

    try:
        return agreed_split({str(work): recorded_split(work)}, given)
    except ValueError as err:
        sys.exit(str(err))


def flow_server():
    """The API the benchmark's flows report to, as the CLI runs them (``prefect_api``): a
    temporary server that stops with the block, and dies with this process when it is killed
    (Prefect's own ephemeral server outlives a SIGKILLed parent, holding the Prefect database)."""
    from prefect.settings import PREFECT_HOME

    from baleen_flows.temporary_server import prefect_api

    return prefect_api(Path(PREFECT_HOME.value()))
