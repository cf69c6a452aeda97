"""A story that outgrows a small window keeps going: turns played through
the pages, narrated by a Celery worker against a real server whose context
is 2,048 tokens while the profile's budget is left at 8,192. Each turn must
finish; none may fail, least of all on an overflow. The story goes on until
it has outgrown the window and its prompts carry the model's summary, then
one turn more (at most the 40 actions written for it)."""

import statistics
import time

import pytest

from storyapp.models import Action, ContextSnapshot, DerivedJob, Summary

from .conftest import ACTIONS, CONTEXT_TOKENS

pytestmark = pytest.mark.django_db(transaction=True)

#: Turns played once the story is past its window and summarized, to show
#: that turns still finish there: the turn that carried the summary was one,
#: and one more proves the next prompt is fitted too.
TURNS_PAST_THE_WINDOW = 1


def story_tokens(campaign) -> int:
    return sum(Action.objects.filter(campaign=campaign).values_list("token_count", flat=True))


def carries_a_summary(narration: Action) -> bool:
    summary = ContextSnapshot.objects.filter(action=narration).values_list("report__summary", flat=True).first()
    return bool(summary and summary.get("parts"))


def turn_record(campaign, narration: Action) -> str:
    """One line of what a turn's prompt did with the story, for the failure report."""
    history = ContextSnapshot.objects.filter(action=narration).values_list("report__history", flat=True).first() or {}
    jobs = DerivedJob.objects.filter(campaign=campaign, kind=DerivedJob.Kind.SUMMARY)
    return (f"narration {narration.token_count} tokens, story {story_tokens(campaign)} tokens, history anchor {history.get('anchor')}, "
            f"summary carried {carries_a_summary(narration)}, summary jobs "
            f"{[(j.state, j.error[:80]) for j in jobs]}")


def test_a_story_past_its_2048_token_window_finishes_every_turn(reader):
    started = time.monotonic()
    seconds, outcomes = [], []
    past = None
    record = []
    for text in ACTIONS:
        turn_started = time.monotonic()
        narration, shown = reader.turn(text)
        seconds.append(time.monotonic() - turn_started)
        outcomes.append((narration.status, narration.error))
        assert narration.status == Action.Status.DONE, (
            f"turn {len(outcomes)} ended {narration.status}: {narration.error}"
        )
        assert narration.text and shown.strip().startswith(narration.text[:40].strip())
        record.append(f"turn {len(outcomes)}: {turn_record(reader.campaign, narration)}")
        if past is None and story_tokens(reader.campaign) > CONTEXT_TOKENS and carries_a_summary(narration):
            past = len(outcomes)
        if past is not None and len(outcomes) >= past + TURNS_PAST_THE_WINDOW:
            break
    played = len(outcomes)
    total = time.monotonic() - started
    print(
        f"\n{played} turns at n_ctx {CONTEXT_TOKENS} in {total:.1f} s (past the window and summarized at turn {past}): "
        f"median {statistics.median(seconds):.2f} s, max {max(seconds):.2f} s a turn"
    )

    assert past is not None, f"{played} turns never outgrew the window with a summary carried:\n" + "\n".join(record)
    assert all(status == Action.Status.DONE and not error for status, error in outcomes)
    narrations = Action.objects.filter(campaign=reader.campaign, kind=Action.Kind.AI)
    assert narrations.count() == played
    assert not narrations.exclude(status=Action.Status.DONE).exists()
    # The story did outgrow the window, so the prompts had to be fitted to it.
    assert story_tokens(reader.campaign) > CONTEXT_TOKENS
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
