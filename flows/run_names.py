"""Flow run names that read well in the Prefect UI, made from the run's parameters. A name function
never raises: it runs before the flow, where an exception would crash the run under a random name."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from prefect.runtime import flow_run


def on_dataset(stage: str) -> Callable[[], str]:
    """``corpus · hover-mini``: the stage and the dataset folder's name (the full path is in the
    run's parameters)."""

    def name() -> str:
        dataset = str(flow_run.parameters.get("dataset_dir") or "")
        return f"{stage} · {Path(dataset).name or dataset}"

    return name


def index_run_name() -> str:
    """``index · untrained · newest passages`` or ``index · flipr-r0 · passages 2026…``."""
    params = flow_run.parameters
    passages = params.get("passages_run")
    return f"index · {params.get('tag') or 'untrained'} · {f'passages {passages}' if passages else 'newest passages'}"


def encode_shards_run_name() -> str:
    """``encode-shards · flipr-r0 · 3 shards``."""
    params = flow_run.parameters
    return f"encode-shards · {params.get('tag') or 'untrained'} · {len(params.get('plan') or [])} shards"


def _claims_and_config(params: dict) -> str:
    claims = params.get("claims_run")
    config = Path(params.get("config_path") or "").stem or "default config"
    return f"{f'claims {claims}' if claims else 'newest claims'} · {config}"


def training_run_name() -> str:
    """``training · claims 2026… · demo-config`` (or ``newest claims``, ``default config``)."""
    return f"training · {_claims_and_config(flow_run.parameters)}"


def evaluation_run_name() -> str:
    """``evaluation · dev · claims 2026… · demo-config``: the split comes from the config (a
    config that does not load names no split: the flow then fails on it, under this name)."""
    from baleen_core.config import BaleenConfig, ConfigError

    params = flow_run.parameters
    try:
        split = BaleenConfig.load(params.get("config_path")).evaluation.split
    except ConfigError:
        return f"evaluation · {_claims_and_config(params)}"
    return f"evaluation · {split} · {_claims_and_config(params)}"
