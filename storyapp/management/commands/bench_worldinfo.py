"""The World Info engine's figures (issue 25), on their own or in `bench`.

The engine is pure (worldinfo), so this needs no database: it times
`worldinfo.engine.evaluate` on the synthetic book of worldinfo.bench, 2,500
entries against a 450-word scene with recursion on (3 steps) and 20
inclusion groups, and the same at 250 entries. Targets: p95 ≤ 25 ms and
≤ 5 ms.
"""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand

from worldinfo.bench import measure

SIZES = (2_500, 250)


def world_info_rows(runs: int) -> list[tuple[str, list[float], str]]:
    """(figure name, samples in ms, note) for each book size."""
    rows = []
    for entries in SIZES:
        measured = measure(entries, groups=20, recursion_steps=3, words=450, runs=runs, clock=time.perf_counter)
        note = f"{measured['activated']} activated in {measured['passes']} passes"
        rows.append((f"World Info engine, {entries:,} entries", measured["samples_ms"], note))
    return rows


def world_info_summary(rows: list[tuple[str, list[float], str]]) -> str:
    """"World Info engine: 2,500 entries p50 … p95 …; 250 entries …"."""
    parts = []
    for name, samples, _ in rows:
        ordered = sorted(samples)
        p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
        entries = name.rsplit(", ", 1)[1]
        parts.append(f"{entries} p50 {ordered[len(ordered) // 2]:.1f} ms p95 {p95:.1f} ms")
    return "World Info engine: " + "; ".join(parts)


class Command(BaseCommand):
    help = "Prints the World Info engine's median and p95 at 2,500 and 250 entries."

    def add_arguments(self, parser):
        parser.add_argument("--runs", type=int, default=50)

    def handle(self, *args, runs: int, **options):
        self.stdout.write(world_info_summary(world_info_rows(runs)))
