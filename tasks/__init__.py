"""Prefect tasks: each adapts a piece of ``baleen_core`` science to orchestration (artifact store
reads/writes, fingerprint reuse, progress artifacts, validation gates)."""

from baleen_core.runtime import apply_runtime_defaults

apply_runtime_defaults()  # before Prefect is imported anywhere below
