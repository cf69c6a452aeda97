import json

from django.core.management.base import BaseCommand, CommandError

from storyapp.bundle.export import export
from storyapp.models import Campaign


class Command(BaseCommand):
    help = "Write a campaign as a bundle (DESIGN.md §9, format version 1) to standard output."

    def add_arguments(self, parser):
        parser.add_argument("campaign_id", type=int)

    def handle(self, *args, campaign_id, **options):
        campaign = Campaign.objects.filter(pk=campaign_id).first()
        if campaign is None:
            raise CommandError(f"No campaign with id {campaign_id}.")
        self.stdout.write(json.dumps(export(campaign), indent=2, ensure_ascii=False))
