"""Narrating one AI action: the worker's side of a turn (DESIGN.md §10).

The narration belongs to the server, not to the browser tab that asked for
it. The worker claims the pending action, builds the prompt, streams the
reply into the action row as it arrives (so a reader who reloads, or opens
the campaign on another device, sees it), checks for Stop between chunks, and
finishes in one transaction that stores the prose and the context snapshot.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime
from functools import partial

from django.db import transaction
from django.utils import timezone

from contextbuild import ContextOverflow, build_context, instruct
from contextbuild.rules import strip_echoed_instructions
from contextbuild.state import apply_block
from contextbuild.tokens import count_tokens
from endpoints import reasoning, slots, window
from endpoints.client import endpoint_for
from endpoints.errors import ContextOverflowAtServer, ModelFailure
from endpoints.models import EndpointLease, EndpointProfile
from endpoints.probing import count_on_server
from endpoints.streaming import Meter, stream_reply
from lifecycle import policy, sending

from . import campaignevents, derived, prompting, review, selectors, stateblock
from .models import Action, ContextSnapshot

log = logging.getLogger(__name__)

#: The task that narrates (storyapp.tasks), named: it imports this module.
NARRATE = "storyapp.tasks.narrate_action"
#: How often streamed text is written to the row. Readers follow the row, so
#: this is the latency they see; writing every token would hammer the database.
FLUSH_SECONDS = 0.15


#: What the reader sees when workers kept dying on one narration.
WORKERS_LOST = (
    "The worker writing this narration stopped {attempts} times, so it was given up. "
    "Your action is kept; press Retry."
)


#: The event told when a narration ends, by how it ended.
FINISHED = {Action.Status.DONE: "narration-finished", Action.Status.FAILED: "narration-failed"}


def recover_stale(campaign_id: int | None = None, *, now: datetime) -> int:
    """Repairs the narrations that a fault left hanging, in one campaign or
    (None) in all; the workers' sweep calls it every few seconds.

    - Pending and not picked up within STALE_AFTER: its broker message was
      lost (a Redis restart, a deleted queue, a refused send). It is sent
      again; should the first message turn up after all, the claim in
      `narrate` refuses the second.
    - Streaming with a stale heartbeat: its worker died. It is pending
      again and sent again, until it has cost MAX_ATTEMPTS workers; then it
      fails, with Retry.

    Returns how many were sent again or failed.
    """
    narrations = Action.objects.filter(stop_requested=False, kind=Action.Kind.AI)
    stuck = narrations.stale(now)
    if campaign_id is not None:
        stuck = stuck.filter(campaign_id=campaign_id)
    count = 0
    for action_id, status, attempts in stuck.values_list("pk", "status", "attempts"):
        # Conditional on the row as read, so two sweeps never both act.
        still = narrations.stale(now).filter(pk=action_id, status=status)
        if status == Action.Status.STREAMING and policy.gives_up(attempts, Action.MAX_ATTEMPTS):
            if still.fail(error=WORKERS_LOST.format(attempts=attempts), heartbeat=None):
                count += 1
                review.hold_cut_short(action_id)
                _told_failed(action_id)
            continue
        # The heartbeat marks when it was last sent, so it is sent again
        # once a period, not on every sweep.
        if still.requeue(now=now):
            sending.send(NARRATE, action_id)
            count += 1
    if count:
        log.warning("Sent again or failed %d narrations left by a lost message or a dead worker", count)
    return count


def on_sweep(sender=None, *, now: datetime, **kwargs) -> None:
    """The workers' periodic sweep (lifecycle.signals.periodic_sweep)."""
    with transaction.atomic():
        recover_stale(now=now)


#: What the reader sees on a narration an operator ended from the monitor.
ENDED_BY_OPERATOR = "An operator ended this narration because it was stuck. Your action is kept; press Retry."


def operator_requeue(action_id: int, *, now: datetime) -> bool:
    """Sends a stuck narration to a worker again (the monitor's Requeue):
    it is pending once more, with a fresh heartbeat, and its text restarts."""
    moved = Action.objects.filter(pk=action_id, kind=Action.Kind.AI).requeue(
        now=now, stop_requested=False, attempts=0
    )
    if moved:
        sending.send_on_commit(NARRATE, action_id, robust=True)
    return bool(moved)


def operator_fail(action_id: int) -> bool:
    """Ends a stuck narration as failed (the monitor's Fail): the reader's
    page settles at once, with Retry."""
    failed = bool(Action.objects.filter(pk=action_id, kind=Action.Kind.AI).fail(
        error=ENDED_BY_OPERATOR, heartbeat=None, stop_requested=True
    ))
    if failed:
        review.hold_cut_short(action_id)
        _told_failed(action_id)
    return failed


def claim(action_id: int, *, now: datetime) -> Action | None:
    """Takes the action for this worker, or None if it is not ours to narrate.

    A conditional UPDATE makes this safe to run twice: a duplicate delivery
    finds the action already streaming (with a live heartbeat) or done.
    """
    if not Action.objects.filter(stop_requested=False).claim(action_id, now=now, text="", error="", error_detail=""):
        return None
    return Action.objects.select_related("campaign", "campaign__endpoint", "parent").get(pk=action_id)


def narrate(action_id: int, *, clock: Callable[[], datetime] = timezone.now) -> None:
    action = claim(action_id, now=clock())
    if action is None:
        return
    try:
        # The beat keeps the heartbeat fresh while no text arrives (the model
        # reading a long prompt, a slow first token), so the sweep leaves a
        # live worker be.
        with Action.objects.filter(pk=action_id).beating(clock):
            _narrate(action, clock)
    except Exception:
        # Whatever went wrong, the reader gets a failed turn they can retry,
        # never a narration that looks busy forever.
        log.exception("Narration of action %s failed", action_id)
        _fail(action, "Something went wrong while writing this narration. Press Retry.")


def _narrate(action: Action, clock: Callable[[], datetime]) -> None:
    campaign = action.campaign
    profile = endpoint_for(campaign)
    if profile is None:
        _fail(action, "No model endpoint is configured for this campaign. Pick one in the campaign's settings.")
        return
    window.probed(profile)
    inputs = prompting.turn_inputs(campaign, profile, position=action.parent, narrating=action)
    try:
        built = build_context(inputs)
    except ContextOverflow as exc:
        # The message may advise loading the model with a larger window; the
        # window is asked again before the next turn, so Retry then fits.
        window.forget_probe(profile)
        _fail(action, str(exc))
        return

    # A shared story's cast: the names its players' actions are sent under.
    speakers = tuple(seat.name for seat in inputs.campaign.cast)
    raw = ""
    last_flush = time.monotonic()
    stopped = False
    failure = detail = None
    meter = Meter()
    try:
        with slots.held(profile, EndpointLease.Kind.NARRATION, waiting=partial(_waiting, action.pk)):
            for delta in stream_reply(
                profile, messages=list(built.messages), prompt_text=built.prompt_text, meter=meter,
                temperature=inputs.settings.temperature, max_tokens=inputs.settings.max_output_tokens,
                samplers=dict(inputs.settings.samplers), prompt_tokens=built.report["tokens"]["total"],
            ):
                raw += delta
                if time.monotonic() - last_flush < FLUSH_SECONDS:
                    continue
                last_flush = time.monotonic()
                # Written on every interval, changed or not: it is also the
                # heartbeat that tells other workers this narration is alive.
                prose, thinking = _reply_parts(raw, meter, speakers)
                if not _flush(action.pk, stateblock.visible_prose(prose), thinking, now=clock()):
                    stopped = True
                    break
    except ContextOverflowAtServer as exc:
        failure, detail = str(exc), exc.detail
        window.learn_window(profile, told=exc.window, budget=built.report["tokens"]["budget"])
        window.forget_probe(profile)
    except ModelFailure as exc:
        failure, detail = str(exc), exc.detail
        window.forget_probe(profile)
    if failure is None:
        _measure(profile, built, meter)
    else:
        log.warning("Narration of action %s failed: %s Server: %s", action.pk, failure, detail or "(nothing)")
    built.report["samplers"] = meter.samplers
    prose, thinking = _reply_parts(raw, meter, speakers)
    if failure is None and not stopped and not stateblock.split(prose)[0].strip() and thinking:
        failure = (
            "The model spent its whole reply thinking and wrote no narration. Press Retry; if it happens again, "
            "an admin can reserve more tokens for reasoning on the profile, or ask the model not to think."
        )
    # Without a lorebook the narration keeps the timers it was created with (its parent's).
    timers = inputs.world_info.timed.as_stored() if inputs.world_info is not None else None
    _finish(action, prose, built, stopped=stopped, failure=failure, detail=detail, thinking=thinking, timers=timers)


def _waiting(action_id: int, waiting: bool) -> None:
    """Tells the page the narration waits for the model server's free slot."""
    Action.objects.filter(pk=action_id).update(waiting_for_server=waiting)


def _reply_parts(raw: str, meter: Meter, speakers: tuple[str, ...]) -> tuple[str, str]:
    """The reply's prose and all the model's thinking: the deltas the server
    sent apart and the blocks in the reply's text. The prose ends at any
    template's turn marker, or at a line the model wrote as one of the
    story's `speakers` (contextbuild.instruct.trimmed_reply)."""
    thought = reasoning.split(raw)
    thinking = "\n\n".join(t for t in (meter.reasoning.strip(), thought.thinking) if t)
    return instruct.trimmed_reply(thought.prose, speakers=speakers), thinking


def _measure(profile: EndpointProfile, built, meter: Meter) -> None:
    """Records the server's count of this prompt beside ours, and the ratio
    the next turns are budgeted with. The count comes from the reply's
    `usage`, else from the server's tokenizer; a server with neither leaves
    the ratio unmeasured."""
    tokens = built.report["tokens"]
    servers, source = meter.prompt_tokens, "usage"
    if not servers:
        text = built.prompt_text or "\n".join(m["content"] for m in built.messages)
        servers, source = count_on_server(profile, text), "tokenizer"
        ours = count_tokens(text)
    else:
        ours = tokens["total"]
    if not servers:
        return
    tokens["server_prompt_tokens"] = servers
    tokens["server_count_source"] = source
    # The count the server's was measured against, so the inspector shows
    # the two numbers its ratio is of (a tokenizer counts the bare text).
    tokens["server_compared_to"] = ours
    tokens["ratio"] = window.record_token_ratio(profile, ours=ours, servers=servers)
    tokens["ratio_learned"] = profile.token_ratio


def _flush(action_id: int, text: str, thinking: str, *, now: datetime) -> bool:
    """Writes the text and the thinking so far; False when the reader has pressed Stop."""
    return bool(
        Action.objects.filter(pk=action_id, stop_requested=False).update(text=text, thinking=thinking, heartbeat=now)
    )


@transaction.atomic
def _finish(
    action: Action, raw: str, built, *, stopped: bool, failure: str | None, detail: str | None = None,
    thinking: str = "", timers: dict | None = None,
) -> None:
    """Stores the outcome and the snapshot. A stopped narration keeps the
    text the reader saw when they pressed Stop (the row's), not what the
    model sent after it; a stop also outranks the error a cut stream raises.
    `detail` is what the server said of a failure, kept for staff. `timers`
    are World Info's timed effects after this prompt, stored with a
    narration that is in the story (a failed one is not: a retry reads the
    parent's)."""
    prose, block = stateblock.split(raw)
    stopped = stopped or Action.objects.filter(pk=action.pk, stop_requested=True).exists()
    if stopped:
        prose = Action.objects.values_list("text", flat=True).get(pk=action.pk)
    # A hint the model copied into its reply must not become story.
    prose = strip_echoed_instructions(prose)
    if stopped:
        status, failure = Action.Status.STOPPED, None
    elif failure is not None:
        status = Action.Status.FAILED
    elif prose:
        status = Action.Status.DONE
    else:
        status, failure = Action.Status.FAILED, "The model returned an empty narration. Press Retry."
    # Checked against this prompt's secrets; held while the game master reviews.
    changes = review.finished(action.campaign, prose, built.report)
    if status != Action.Status.FAILED and timers is not None:
        changes["world_info_timers"] = timers
    if status == Action.Status.DONE:
        # A finished reply's block moves the state this action stores; a
        # stopped or failed one leaves it as the turn found it.
        forbidden = tuple((c.get("from", ""), c.get("to", "")) for c in action.campaign.forbidden_status_changes)
        outcome = apply_block(action.state, block, forbidden=forbidden, seats=selectors.seat_names(action.campaign))
        changes |= {"state": outcome.state, "state_rejections": list(outcome.refused)}
        built.report["state_events"] = outcome.as_record()
        # Robust: derived work never fails the narration that gave rise to it.
        transaction.on_commit(partial(derived.after_narration, action.pk), robust=True)
    Action.objects.filter(pk=action.pk).update(
        text=prose,
        token_count=count_tokens(prose),
        status=status,
        error=failure or "",
        error_detail=(detail or "") if failure else "",
        thinking=thinking,
        heartbeat=None,
        **changes,
    )
    ContextSnapshot.objects.update_or_create(
        action=action,
        defaults={
            "report": built.report,
            "system_text": built.system_text,
            "story_text": built.story_text,
            "messages": _as_sent(built),
        },
    )
    # A stop was told when it was pressed (services.narration_stop).
    if status != Action.Status.STOPPED:
        campaignevents.emit(action.campaign_id, FINISHED[status], {"action": action.pk})


def _as_sent(built) -> list[dict]:
    if built.prompt_text:
        return [{"role": "prompt", "content": built.prompt_text}]
    return [dict(m) for m in built.messages]


def _fail(action: Action, message: str) -> None:
    Action.objects.filter(pk=action.pk).update(status=Action.Status.FAILED, error=message, heartbeat=None)
    campaignevents.emit(action.campaign_id, FINISHED[Action.Status.FAILED], {"action": action.pk})


def _told_failed(action_id: int) -> None:
    campaign_id = Action.objects.values_list("campaign_id", flat=True).get(pk=action_id)
    campaignevents.emit(campaign_id, FINISHED[Action.Status.FAILED], {"action": action_id})
