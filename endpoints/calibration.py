"""Measuring an embedding model's semantic admission floor.

Cosine scales differ between embedding models: one model's "unrelated" can be
another's "related". So retrieval admits a passage semantically only against
a floor measured for exactly the model in use, and a model with no floor has
its semantic path disabled (knowledge/retrieval.py, which asks `floor_for`).

Method. The calibration set (endpoints/data/calibration_pairs.json) holds 40
topics, each a story moment and a lore passage about the same subject.

1. Embed every scene and every passage with the model.
2. Related scores: each scene against its own passage (40 pairs).
   Unrelated scores: each scene against every other topic's passage
   (40 × 39 pairs): fantasy text about something else, the hard case.
3. The floor is the midpoint between the unrelated 95th percentile and the
   related 10th percentile: above nearly every unrelated pair and below nearly
   every related one.
4. If the unrelated 95th percentile reaches the related 10th percentile, the
   model cannot tell the two apart well enough and no floor is recorded.

Floors measured here for models the app can run itself ship in
endpoints/data/calibrations.json (`calibrate_embeddings --ship` writes it),
so a local model is calibrated on a fresh install; a floor recorded in the
database, measured on the reader's own machine, takes precedence.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from pathlib import Path

import numpy as np

from .models import EmbeddingCalibration

DATA = Path(__file__).parent / "data" / "calibration_pairs.json"
SHIPPED = Path(__file__).parent / "data" / "calibrations.json"
METHOD = "midpoint of unrelated p95 and related p10"


@dataclass(frozen=True)
class Measurement:
    related: dict
    unrelated: dict
    floor: float | None
    refusal: str = ""


def topics(path: Path = DATA) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["topics"]


def distribution(scores: np.ndarray) -> dict:
    """min / p10 / median / p90 / p95 / max and the count, rounded."""
    points = {"min": 0, "p10": 10, "median": 50, "p90": 90, "p95": 95, "max": 100}
    return {name: round(float(np.percentile(scores, q)), 4) for name, q in points.items()} | {
        "pairs": int(scores.size)
    }


def measure(scenes: np.ndarray, passages: np.ndarray) -> Measurement:
    """The two distributions and the floor, from row-aligned scene and
    passage vectors (row i of each is topic i)."""
    scenes = _unit(np.asarray(scenes, dtype=np.float32))
    passages = _unit(np.asarray(passages, dtype=np.float32))
    grid = scenes @ passages.T
    related = np.diag(grid)
    unrelated = grid[~np.eye(len(grid), dtype=bool)]
    low, high = distribution(related), distribution(unrelated)
    if high["p95"] >= low["p10"]:
        return Measurement(
            low,
            high,
            None,
            f"The distributions overlap: unrelated p95 {high['p95']:.3f} reaches related p10 "
            f"{low['p10']:.3f}, so no floor separates them. Semantic retrieval stays disabled for this model.",
        )
    return Measurement(low, high, round((high["p95"] + low["p10"]) / 2, 4))


def _unit(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms


@lru_cache(maxsize=4)
def shipped(path: Path = SHIPPED) -> dict[str, dict]:
    """The floors shipped with the app, by model name (read once a process:
    every turn asks)."""
    if not path.exists():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))["models"]


def ship(*, model: str, measurement: Measurement, now: datetime, path: Path = SHIPPED) -> None:
    """Writes (or replaces) the model's shipped floor, with the numbers behind it."""
    models = dict(shipped(path))
    models[model] = {
        **{k: v for k, v in models.get(model, {}).items() if k == "confirms_pairs"},
        "floor": measurement.floor,
        "related": measurement.related,
        "unrelated": measurement.unrelated,
        "method": METHOD,
        "measured_at": now.date().isoformat(),
    }
    about = json.loads(path.read_text(encoding="utf-8"))["about"] if path.exists() else ""
    path.write_text(json.dumps({"about": about, "models": dict(sorted(models.items()))}, indent=2) + "\n")
    shipped.cache_clear()


def floor_for(model: str) -> float | None:
    """The calibrated cosine floor for exactly `model`: recorded here, else
    shipped; None when neither has one."""
    if not model:
        return None
    recorded = EmbeddingCalibration.objects.filter(model=model).values_list("floor", flat=True).first()
    if recorded is not None:
        return recorded
    return shipped().get(model, {}).get("floor")


def confirms_pairs(model: str) -> bool:
    """Whether the model's cosine may confirm or veto a lexical admission on
    two words: shown for the shipped models that read meaning (a
    bag-of-words model such as the scripted demo's only repeats the words)."""
    return bool(shipped().get(model, {}).get("confirms_pairs"))


def calibrated_models() -> list[str]:
    return sorted(set(EmbeddingCalibration.objects.values_list("model", flat=True)) | set(shipped()))


def calibration_record(*, model: str, measurement: Measurement, now: datetime):
    """Stores (or replaces) the model's floor."""
    calibration, _ = EmbeddingCalibration.objects.update_or_create(
        model=model,
        defaults={
            "floor": measurement.floor,
            "related": measurement.related,
            "unrelated": measurement.unrelated,
            "method": METHOD,
            "measured_at": now,
        },
    )
    return calibration
