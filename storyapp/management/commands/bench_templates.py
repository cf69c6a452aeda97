"""Rendering a prompt in each instruct template (issue 26), on its own or in `bench`.

Completions mode renders the conversation chat mode would send in the
model's template (contextbuild.instruct) on every turn and every summary:
timed here for a 2,000-action window, the worst a long story hands it.
Target: p95 ≤ 1 ms in any template. Pure: no database.
"""

from __future__ import annotations

import gc
import time

from django.core.management.base import BaseCommand

from contextbuild import instruct

ACTIONS = 2_000


def _window() -> list[dict]:
    turns = [{"role": "user" if n % 2 == 0 else "assistant",
              "content": f"Turn {n}. The tide turns under the pier and the gulls wheel over the quay."}
             for n in range(ACTIONS)]
    return [{"role": "system", "content": "You narrate an interactive story. " * 40}, *turns]


def template_rows(runs: int) -> list[tuple[str, list[float], str]]:
    """(figure name, samples in ms, note) for each template. The collector
    is paused while timing: its pauses are the process's, not the renderer's."""
    messages = _window()
    rows = []
    for name, chosen in instruct.templates().items():
        samples = []
        gc.disable()
        try:
            for _ in range(runs):
                started = time.perf_counter()
                instruct.render(messages, name)
                samples.append((time.perf_counter() - started) * 1000)
        finally:
            gc.enable()
        rows.append((f"Instruct template {chosen.label}, {ACTIONS:,} actions", samples, name))
    return rows


def template_summary(rows: list[tuple[str, list[float], str]]) -> str:
    """The slowest template's p95, the figure the target is about."""
    worst_name, worst = "", 0.0
    for name, samples, _ in rows:
        ordered = sorted(samples)
        p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
        if p95 >= worst:
            worst_name, worst = name, p95
    return f"Instruct templates: {len(rows)} rendered for {ACTIONS:,} actions; the slowest p95 {worst:.2f} ms ({worst_name})"


class Command(BaseCommand):
    help = "Prints how long rendering a 2,000-action window takes in each instruct template."

    def add_arguments(self, parser):
        parser.add_argument("--runs", type=int, default=100)

    def handle(self, *args, runs: int, **options):
        rows = template_rows(runs)
        for name, samples, _ in rows:
            ordered = sorted(samples)
            self.stdout.write(f"{name}: p50 {ordered[len(ordered) // 2]:.2f} ms, p95 {ordered[round(0.95 * (len(ordered) - 1))]:.2f} ms")
        self.stdout.write(template_summary(rows))
