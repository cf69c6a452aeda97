import json

from django.core.management.base import BaseCommand, CommandError

from contextbuild import ContextOverflow, build_context
from endpoints.client import endpoint_for
from storyapp import lineage, prompting
from storyapp.models import Action, Campaign, ContextSnapshot
from storyapp.selectors import PREVIOUS_LOOKBACK


class Command(BaseCommand):
    help = (
        "Print the context report the campaign's next turn would get. Nothing is "
        "stored and no model is called; --budget overrides the context token budget "
        "for this run only."
    )

    def add_arguments(self, parser):
        parser.add_argument("--campaign", type=int, required=True)
        parser.add_argument("--player-text", default="", help="A reader's action to build the turn for.")
        parser.add_argument("--budget", type=int, help="Context token budget for this run.")
        parser.add_argument("--json", action="store_true", help=(
            "Print the whole report as JSON; its summary, memories, state and world_info are what the turn "
            "would use, and state_events what the last narration applied and refused."
        ))

    def handle(self, *args, campaign, player_text, budget, **options):
        found = Campaign.objects.filter(pk=campaign).first()
        if found is None:
            raise CommandError(f"No campaign with id {campaign}.")
        profile = endpoint_for(found)
        if profile is None:
            raise CommandError("The campaign has no endpoint profile and there is no default one.")
        if budget is not None and budget <= 0:
            raise CommandError("--budget must be a positive number of tokens.")
        head = Action.objects.filter(pk=found.head_id).first()
        try:
            built = build_context(
                prompting.turn_inputs(found, profile, position=head, player_text=player_text, budget=budget)
            )
        except ContextOverflow as exc:
            raise CommandError(str(exc)) from exc
        if options["json"]:
            report = {**built.report, "state_events": _previous_state_events(found, head)}
            self.stdout.write(json.dumps(report, indent=2, ensure_ascii=False))
            return
        tokens = built.report["tokens"]
        for section in built.report["sections"]:
            self.stdout.write(f"{section['tokens']:>7}  {section['block']:<6} {section['label']}")
        self.stdout.write(
            f"{tokens['total']:>7}  total of a {tokens['budget']}-token budget, "
            f"{tokens['output_reserve']} reserved for the reply"
        )
        lore = built.report["world_info"]
        if lore["activated"] or lore["skipped"]:
            self.stdout.write(
                f"World Info: {len(lore['activated'])} of {len(lore['activated']) + len(lore['skipped'])} entries "
                f"activated, {lore['used']} of its {lore['budget']}-token budget. {lore['rule']}"
            )


def _previous_state_events(campaign: Campaign, head: Action | None):
    """What the last narration on the head's lineage applied and refused:
    a preview has no reply of its own, and these are the changes (and the
    refusals) its prompt was built on. None before the first narration."""
    for action in reversed(lineage.tail(campaign.pk, head.pk if head else None, PREVIOUS_LOOKBACK)):
        if action.kind == Action.Kind.AI:
            report = ContextSnapshot.objects.filter(action=action).values_list("report", flat=True).first()
            if report is not None:
                return report.get("state_events") if isinstance(report, dict) else None
    return None
