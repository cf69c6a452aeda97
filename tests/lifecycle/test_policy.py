"""The lifecycle's rules, without a database: when work is stale, how long
a retry waits, when work is given up."""

from datetime import datetime, timedelta, timezone

import pytest

from lifecycle import policy

NOW = datetime(2026, 12, 2, 9, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("silent_for", "stale"),
    [
        (None, True),
        (timedelta(0), False),
        (timedelta(seconds=policy.BEAT_SECONDS), False),
        (policy.STALE_AFTER, False),
        (policy.STALE_AFTER + timedelta(microseconds=1), True),
        (timedelta(minutes=5), True),
    ],
)
def test_running_work_is_stale_once_it_missed_four_beats(silent_for, stale):
    seen = None if silent_for is None else NOW - silent_for
    assert policy.is_stale(seen, NOW) is stale


def test_the_figures_repair_a_fault_within_the_minute():
    """Silent for STALE_AFTER, found by the next sweep: four beats missed,
    and room left for the work itself."""
    assert policy.STALE_AFTER.total_seconds() == 4 * policy.BEAT_SECONDS
    assert policy.STALE_AFTER.total_seconds() + policy.SWEEP_SECONDS <= 30


@pytest.mark.parametrize(
    ("attempt", "seconds"),
    [(0, 10), (1, 10), (2, 30), (3, 60), (4, 120), (5, 300), (6, 300), (50, 300)],
)
def test_the_backoff_grows_and_then_repeats_its_last_step(attempt, seconds):
    assert policy.backoff(attempt) == seconds


@pytest.mark.parametrize(
    ("attempts", "max_attempts", "given_up"),
    [(0, 3, False), (2, 3, False), (3, 3, True), (4, 3, True), (1, 1, True)],
)
def test_work_is_given_up_after_its_last_attempt(attempts, max_attempts, given_up):
    assert policy.gives_up(attempts, max_attempts) is given_up


@pytest.mark.parametrize(
    ("attempt", "final", "max_attempts", "wait"),
    [
        (1, False, None, 10),
        (2, False, None, 30),
        (1, True, None, None),
        (1, False, 3, 10),
        (2, False, 3, 30),
        (3, False, 3, None),
        (2, True, 3, None),
    ],
)
def test_a_failed_attempt_is_retried_after_its_backoff_unless_it_was_the_last(attempt, final, max_attempts, wait):
    assert policy.retry_in(attempt, final=final, max_attempts=max_attempts) == wait


def test_retry_later_carries_its_countdown():
    error = policy.RetryLater("The endpoint is down.", 30)
    assert str(error) == "The endpoint is down." and error.countdown == 30

