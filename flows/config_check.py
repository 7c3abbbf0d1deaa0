"""A flow's config file is validated before anything of the flow runs.

The CLI validates it before starting a flow (``baleen_flows.cli``), but a deployment run (the UI,
a schedule, ``prefect deployment run``) starts the flow directly. There, a bad file ends the run
in state Failed with the one-line error as its state message, which the run's page shows, instead
of an exception's traceback, and nothing of the flow runs.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable

from prefect.states import Failed

from baleen_core.config import BaleenConfig, ConfigError


def config_checked(flow_function: Callable) -> Callable:
    """Wrap a flow function whose ``config_path`` parameter names its config file (see the
    module's docstring); put it under ``@flow``, which reads the function's own signature."""
    signature = inspect.signature(flow_function)

    @functools.wraps(flow_function)
    def checked(*args, **kwargs):
        config_path = signature.bind(*args, **kwargs).arguments.get("config_path")
        try:
            BaleenConfig.load(config_path)
        except ConfigError as err:
            return Failed(message=str(err))
        return flow_function(*args, **kwargs)

    # Prefect resolves a flow's annotations (strings, under `from __future__ import annotations`)
    # in the namespace of the function it was given, which here is this module: give it them resolved
    hints = typing.get_type_hints(flow_function)
    checked.__signature__ = signature.replace(
        parameters=[p.replace(annotation=hints.get(p.name, p.annotation)) for p in signature.parameters.values()],
        return_annotation=hints.get("return", signature.return_annotation),
    )
    return checked
