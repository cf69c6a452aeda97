"""A story that outgrows a small window keeps going: 40 turns played through
the pages, narrated by a Celery worker against a real server whose context
is 2,048 tokens while the profile's budget is left at 8,192. Each turn must
finish; none may fail, least of all on an overflow."""

import statistics
import time

import pytest

from storyapp.models import Action, ContextSnapshot, DerivedJob, Summary

from .conftest import ACTIONS, CONTEXT_TOKENS

pytestmark = pytest.mark.django_db(transaction=True)


def test_forty_turns_on_a_2048_token_window_all_finish(reader):
    started = time.monotonic()
    seconds, outcomes = [], []
    for text in ACTIONS:
        turn_started = time.monotonic()
        narration, shown = reader.turn(text)
        seconds.append(time.monotonic() - turn_started)
        outcomes.append((narration.status, narration.error))
        assert narration.status == Action.Status.DONE, (
            f"turn {len(outcomes)} ended {narration.status}: {narration.error}"
        )
        assert narration.text and shown.strip().startswith(narration.text[:40].strip())
    total = time.monotonic() - started
    print(
        f"\n{len(ACTIONS)} turns at n_ctx {CONTEXT_TOKENS} in {total:.1f} s: "
        f"median {statistics.median(seconds):.2f} s, max {max(seconds):.2f} s a turn"
    )

    assert len(ACTIONS) == 40
    assert all(status == Action.Status.DONE and not error for status, error in outcomes)
    narrations = Action.objects.filter(campaign=reader.campaign, kind=Action.Kind.AI)
    assert narrations.count() == 40
    assert not narrations.exclude(status=Action.Status.DONE).exists()
    # The story did outgrow the window, so the prompts had to be fitted to it.
    story_tokens = sum(Action.objects.filter(campaign=reader.campaign).values_list("token_count", flat=True))
    assert story_tokens > CONTEXT_TOKENS
    # What fell out of the window was summarized by the model, and later
    # turns were given that summary (issue 12's long story, end to end).
    summaries = Summary.objects.filter(campaign=reader.campaign)
    used = [r for r in ContextSnapshot.objects.filter(action__campaign=reader.campaign)
            .values_list("report__summary", flat=True) if r]
    jobs = DerivedJob.objects.filter(campaign=reader.campaign)
    print(f"{summaries.count()} summaries, {len(used)} prompts carried one; derived jobs: "
          f"{sorted(jobs.values_list('state', flat=True))}")
    assert summaries.exists() and all(s.text.strip() for s in summaries)
    assert used and used[-1]["parts"]
