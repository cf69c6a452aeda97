"""The engine's benchmark builds the same book every time and times it."""

from itertools import count

from worldinfo.bench import book, measure


def test_the_synthetic_book_is_deterministic():
    assert book(50, 5, 100) == book(50, 5, 100)


def test_measure_reports_percentiles_from_the_clock_it_is_given():
    ticks = count()
    measured = measure(60, groups=5, recursion_steps=3, words=100, runs=20, clock=lambda: next(ticks) / 8)
    assert measured["p50_ms"] == measured["p95_ms"] == 125.0
    assert measured["runs"] == 20 and measured["activated"] > 0 and measured["passes"] >= 2
