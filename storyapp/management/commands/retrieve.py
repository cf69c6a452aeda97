import json

from django.core.management.base import BaseCommand, CommandError

from endpoints.client import endpoint_for
from endpoints.embeddings import for_retrieval
from knowledge.retrieval import explain
from storyapp import prompting
from storyapp.models import Action, Campaign


class Command(BaseCommand):
    help = (
        "Print what retrieval offers the campaign's next turn at its current position: the query "
        "terms, the ranked candidates with their scores, and every generated candidate's admission "
        "decision (admitted, by which path, or rejected and why). Nothing is stored; the query "
        "embedding is requested from the campaign's endpoint as a turn would."
    )

    def add_arguments(self, parser):
        parser.add_argument("--campaign", type=int, required=True)
        parser.add_argument("--player-text", default="", help="A reader's action not yet taken.")
        parser.add_argument("--json", action="store_true", help="Print the whole decision as JSON.")

    def handle(self, *args, campaign, player_text, **options):
        found = Campaign.objects.filter(pk=campaign).first()
        if found is None:
            raise CommandError(f"No campaign with id {campaign}.")
        profile = endpoint_for(found)
        head = Action.objects.filter(pk=found.head_id).first()
        inputs = prompting.query_inputs(
            found, position=head, state=found.state_at(head), player_text=player_text
        )
        worked = explain(campaign_id=found.pk, query=inputs, **for_retrieval(profile))
        result = worked.result
        report = {
            "campaign": found.pk,
            "position": head.pk if head else None,
            "terms": list(result.terms),
            "rank_terms": list(result.rank_terms),
            "standing_entities": [sorted(group) for group in worked.query.standing],
            "semantic": {
                "model": result.embedding_model,
                "calibrated": result.semantic_calibrated,
                "floor": result.semantic_floor,
                "used": result.semantic_used,
                "note": result.semantic_note,
            },
            "generated": result.generated,
            "rejected": result.rejected,
            "considered": result.considered,
            "candidates": [dict(c.as_record(), text=c.text) for c in result.candidates],
            "suppressed": [dict(c.as_record(), duplicate_of=c.duplicate_of) for c in result.suppressed],
            "decisions": list(worked.decisions),
        }
        if options["json"]:
            self.stdout.write(json.dumps(report, indent=2, ensure_ascii=False, default=str))
            return
        self.stdout.write("Terms: " + ", ".join(result.terms))
        if len(result.rank_terms) < len(result.terms):
            self.stdout.write("Ranked on the rarest: " + ", ".join(result.rank_terms))
        if result.semantic_note:
            self.stdout.write(result.semantic_note)
        self.stdout.write(f"{result.generated} generated, {result.rejected} rejected, {result.considered} considered")
        for rank, c in enumerate(result.candidates, 1):
            self.stdout.write(
                f"{rank:>3}. {c.score:.3f} {c.classification:<11} {c.filename} · passage {c.chunk_index + 1}"
                f" ({c.admitted_by}; {', '.join(c.matched_terms)})"
            )
        for d in worked.decisions:
            if not d["admitted"]:
                self.stdout.write(f"  rejected #{d['chunk_id']} {d.get('filename', '')}: {d['why']}")
