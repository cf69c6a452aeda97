"""What a profile's semantic search runs on, in a sentence for its admin page.

A local embedding model runs in the workers, never in the web process that
renders the page, so the page asks which local models the live workers can
run. Who knows that (the workers' heartbeats) sits above this layer, so it
registers a provider here (`provide_worker_models`, from its AppConfig.ready);
with none registered, or no live worker, the page looks at this process's
own install.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from . import calibration, embeddings, localembed

#: now -> the local models of each live worker (one set per worker).
WorkerModels = Callable[[datetime], list[set[str]]]

_worker_models: WorkerModels | None = None


def provide_worker_models(provider: WorkerModels | None) -> None:
    """Registers the function that says which local models each live worker can run."""
    global _worker_models
    _worker_models = provider


def embedding_status(profile, *, now: datetime) -> str:
    """The model (the profile's own or the instance default), its floor, and
    for a local model whether it can run (`local_problem`)."""
    model = embeddings.model_of(profile)
    if not model:
        return "No embedding model: lore is searched by its words only."
    origin = "" if profile.embedding_model.strip() else " (the instance default, LOREMASTER_EMBEDDING_MODEL)"
    floor = calibration.floor_for(model)
    calibrated = f"semantic floor {floor:.3f}" if floor is not None else (
        f"no calibrated floor, so semantic search stays off until `manage.py calibrate_embeddings --model {model}`"
    )
    line = f"{model}{origin}: {calibrated}."
    if not localembed.is_local(model):
        return line
    problem = local_problem(profile, now=now)
    return f"{line} {problem or 'Computed by the workers, with no embedding server.'}"


def local_problem(profile, *, now: datetime) -> str:
    """Why a profile's local embedding model cannot run, or "". Asks the live
    workers (they embed, the page never does); with none it looks at this
    process's own install."""
    model = embeddings.model_of(profile)
    if not localembed.is_local(model):
        return ""
    live = _worker_models(now) if _worker_models is not None else []
    if not live or model not in localembed.MODELS:
        return localembed.missing(model)
    if any(model in models for models in live):
        return ""
    return (
        f"The local embedding model “{model}” is chosen but not installed on any of the {len(live)} live "
        f"workers. Install it with `{localembed.INSTALL}` in the workers' environment and restart them; "
        "until then retrieval is lexical only."
    )
