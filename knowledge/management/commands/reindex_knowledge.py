from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from knowledge import services
from knowledge.models import KnowledgeSource
from storyapp.models import Campaign


class Command(BaseCommand):
    help = (
        "Queue a re-index of every source (or one campaign's), and requeue index jobs "
        "whose worker died. Old passages stay searchable until each rebuild is swapped in."
    )

    def add_arguments(self, parser):
        parser.add_argument("--campaign", type=int, help="Only this campaign's sources.")
        parser.add_argument("--wait", action="store_true", help="Index here and wait; needs no worker.")

    def handle(self, *args, campaign, wait, **options):
        sources = KnowledgeSource.objects.order_by("campaign_id", "id")
        if campaign is not None:
            if not Campaign.objects.filter(pk=campaign).exists():
                raise CommandError(f"No campaign with id {campaign}.")
            sources = sources.filter(campaign_id=campaign)
        recovered = services.jobs_recover(now=timezone.now())
        if recovered:
            self.stdout.write(f"Requeued {len(recovered)} orphaned job(s).")
        failed = 0
        for source in sources.defer("content").iterator():
            if wait:
                source = services.source_index_now(source)
                failed += source.index_state == KnowledgeSource.IndexState.FAILED
                self.stdout.write(f"#{source.pk} {source.title}: {source.get_index_state_display()}")
            else:
                services.source_reindex(source=source)
        if not wait:
            self.stdout.write(f"Queued {sources.count()} source(s) for re-indexing.")
        if failed:
            raise CommandError(f"{failed} source(s) failed.")
