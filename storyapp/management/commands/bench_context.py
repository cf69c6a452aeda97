import statistics
import time

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import connection, transaction

from contextbuild import build_context
from contextbuild.tokens import count_tokens
from storyapp import prompting
from storyapp.models import Action, Campaign, EndpointProfile

PARAGRAPH = (
    "The rain came sideways off the harbour, and the lanterns along the quay swung on their hooks. "
    "Mara kept her hood low and counted the barrels stacked by the customs house, twice, because "
    "the first count had come out one short and that was the kind of mistake that got people hanged."
)


class _Rollback(Exception):
    pass


class Command(BaseCommand):
    help = (
        "Benchmark per-turn prompt assembly (excluding retrieval, which bench_retrieval measures, "
        "and the model call): "
        "reading the lineage window and building the prompt for a long story. Works in "
        "a transaction that is rolled back, so the database is left as it was."
    )

    def add_arguments(self, parser):
        parser.add_argument("--actions", type=int, default=2000)
        parser.add_argument("--budget", type=int, default=8000)
        parser.add_argument("--runs", type=int, default=50)

    def handle(self, *args, actions, budget, runs, **options):
        try:
            with transaction.atomic():
                self._bench(actions, budget, runs)
                raise _Rollback
        except _Rollback:
            pass

    def _bench(self, length: int, budget: int, runs: int) -> None:
        owner = get_user_model().objects.create(username="bench-context-reader")
        profile = EndpointProfile.objects.create(
            name="bench-context", base_url="http://127.0.0.1:9/v1", chat_model="bench",
            context_token_budget=budget, max_output_tokens=600,
        )
        campaign = Campaign.objects.create(owner=owner, title="Benchmark", endpoint=profile, plot_essentials=PARAGRAPH)
        tokens = count_tokens(PARAGRAPH)
        parent = None
        for depth in range(length):
            parent = Action.objects.create(
                campaign=campaign, parent=parent, depth=depth, text=f"{depth}. {PARAGRAPH}",
                kind=Action.Kind.PLAYER if depth % 2 == 0 else Action.Kind.AI, token_count=tokens + 3,
            )
        campaign.head = parent
        campaign.save()
        if connection.vendor == "postgresql":
            # A live instance's autovacuum keeps these statistics current; rows
            # written a moment ago in this transaction would otherwise leave the
            # planner believing the table empty, and walking it row by row.
            with connection.cursor() as cursor:
                cursor.execute(f"ANALYZE {Action._meta.db_table}")

        gather, build, whole = [], [], []
        for _ in range(runs):
            started = time.perf_counter()
            inputs = prompting.turn_inputs(campaign, profile, position=parent, with_knowledge=False)
            gathered = time.perf_counter()
            build_context(inputs)
            finished = time.perf_counter()
            gather.append(gathered - started)
            build.append(finished - gathered)
            whole.append(finished - started)

        self.stdout.write(f"Prompt assembly, {length}-action story, {budget}-token budget, {runs} runs:")
        for label, timings in (("read lineage window", gather), ("build prompt", build), ("whole step", whole)):
            ordered = sorted(timings)
            p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
            self.stdout.write(
                f"  {label:<20} median {statistics.median(ordered) * 1000:7.2f} ms   p95 {p95 * 1000:7.2f} ms"
            )
