"""What a profile's semantic search runs on, in a sentence for its admin page.

A local embedding model runs in the workers, never in the web process that
renders the page, so the page asks which local models the live workers can
run. Who knows that (the workers' heartbeats) sits above this layer and
answers through `lifecycle.workers`; with no live worker, the page looks at
this process's own install.
"""

from __future__ import annotations

from datetime import datetime

from lifecycle import workers

from . import calibration, embeddings, localembed

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
    live = workers.live(now=now)
    if not live or model not in localembed.MODELS:
        return localembed.missing(model)
    if any(model in worker.local_models for worker in live):
        return ""
    return (
        f"The local embedding model “{model}” is chosen but not installed on any of the {len(live)} live "
        f"workers. Install it with `{localembed.INSTALL}` in the workers' environment and restart them; "
        "until then retrieval is lexical only."
    )
