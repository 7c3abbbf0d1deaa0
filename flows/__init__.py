"""Prefect flows: thin, each reads like its stage of the pipeline diagram."""

from baleen_core.runtime import apply_runtime_defaults

apply_runtime_defaults()  # before Prefect is imported anywhere below
