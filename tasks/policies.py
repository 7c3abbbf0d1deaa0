"""Run policies shared by the tasks: which tasks hold the GPU, and which failures are retried
(transient I/O, never deterministic failures such as bad input or a failed gate)."""

from __future__ import annotations

from baleen_core.rejects import InputError

#: Tag of every task that runs a model (encoding, training, labelling, verifying). A Prefect tag
#: concurrency limit on it lets one such task run at a time across all flow runs, so two runs
#: never share one GPU's memory; `prefect deploy` creates it (:func:`ensure_gpu_limit`).
GPU_TAG = "gpu"


def ensure_gpu_limit(limit: int = 1) -> dict:
    """A ``prefect.yaml`` build step: create (or update) the :data:`GPU_TAG` concurrency limit on
    the server being deployed to, so that deploying is enough, with no step left to the README."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        client.create_concurrency_limit(tag=GPU_TAG, concurrency_limit=limit)
    return {"tag": GPU_TAG, "limit": limit}


#: Seconds between a flow run's heartbeats (PREFECT_FLOWS_HEARTBEAT_FREQUENCY, Prefect's minimum
#: 30): set for the flow runs of the deployments (prefect.yaml) and of the CLI (baleen_core.runtime).
HEARTBEAT_SECONDS = 30
#: A flow run of ours silent this long is dead (its process was killed, ran out of memory or
#: lost its machine): four heartbeats missed, so that a busy process is never mistaken for one.
ZOMBIE_AFTER_SECONDS = 4 * HEARTBEAT_SECONDS
ZOMBIE_AUTOMATION = "openbaleen: crash flow runs that stopped their heartbeats"
#: The flows whose runs the automation watches: only ours beat every HEARTBEAT_SECONDS.
FLOW_NAMES = ("corpus", "claims", "ingest", "index", "encode-shards", "labels", "training", "condensers", "evaluation", "pipeline", "demo")


def ensure_zombie_detection(within_seconds: int = ZOMBIE_AFTER_SECONDS) -> dict:
    """A ``prefect.yaml`` build step: create (or update) the automation that marks a flow run of
    ours Crashed once it has sent no heartbeat for ``within_seconds`` while still Running, as
    Prefect documents for self-hosted servers ("Detect zombie flows"), so that a SIGKILLed run
    does not stay Running in the UI forever. The server's triggers service must be on (it is, in
    ``prefect server start``)."""
    from datetime import timedelta

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.objects import StateType
    from prefect.events.actions import ChangeFlowRunState
    from prefect.events.schemas.automations import AutomationCore, EventTrigger, Posture
    from prefect.events.schemas.events import ResourceSpecification

    automation = AutomationCore(
        name=ZOMBIE_AUTOMATION,
        description=f"A flow run of the openbaleen flows with no heartbeat for {within_seconds} s is dead: marked Crashed.",
        trigger=EventTrigger(
            after={"prefect.flow-run.heartbeat"},
            expect={"prefect.flow-run.heartbeat", *(f"prefect.flow-run.{s}" for s in ("Completed", "Failed", "Cancelled", "Crashed"))},
            match=ResourceSpecification({"prefect.resource.id": ["prefect.flow-run.*"]}),
            match_related=ResourceSpecification({"prefect.resource.role": "flow", "prefect.resource.name": list(FLOW_NAMES)}),
            for_each={"prefect.resource.id"},
            posture=Posture.Proactive,
            threshold=1,
            within=timedelta(seconds=within_seconds),
        ),
        actions=[
            ChangeFlowRunState(
                state=StateType.CRASHED,
                message=f"no heartbeat for {within_seconds} s: its process died (killed, out of memory, or its machine lost); run it again to resume",
            )
        ],
    )
    with get_client(sync_client=True) as client:
        existing = client.read_automations_by_name(name=ZOMBIE_AUTOMATION)
        if existing:
            client.update_automation(automation_id=existing[0].id, automation=automation)
        else:
            client.create_automation(automation=automation)
    return {"automation": ZOMBIE_AUTOMATION, "within_seconds": within_seconds}


def retry_on_transient_io(task, task_run, state) -> bool:
    """Prefect ``retry_condition_fn``: True only for OS-level I/O errors other than a missing file.

    A truncated or malformed input (``InputError``), a schema mismatch or a code error fails the
    same way every time, so retrying would only delay the readable error.
    """
    try:
        state.result()
    except InputError:
        return False
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        return False
    except OSError:
        return True
    except Exception:
        return False
    return False
