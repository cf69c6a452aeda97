from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

import quotas
from storyapp.bundle import BundleError
from storyapp.bundle.importer import import_and_index
from storyapp.bundle.validate import parse


class Command(BaseCommand):
    help = (
        "Read a campaign bundle (format version 1) into a new campaign owned by --owner, "
        "index its knowledge sources in this process, and print the new campaign's id last."
    )

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument("--owner", required=True, help="Username of the reader who will own it.")

    def handle(self, *args, path, owner, **options):
        reader = get_user_model().objects.filter(username=owner).first()
        if reader is None:
            raise CommandError(f"No reader called “{owner}”.")
        try:
            with open(path, "rb") as handle:
                raw = handle.read()
        except OSError as exc:
            raise CommandError(f"Cannot read {path}: {exc.strerror}.") from exc
        try:
            campaign = import_and_index(parse(raw, name=path), owner=reader)
        except (BundleError, quotas.OverQuota) as exc:
            raise CommandError(f"Nothing was imported: {exc}") from exc
        for source in campaign.sources.order_by("id"):
            detail = f"{source.passage_count} passages" if source.index_state == "ready" else source.error
            self.stdout.write(f"  {source.original_filename}: {source.index_state} ({detail})")
        self.stdout.write(f"Imported “{campaign.title}” as campaign {campaign.pk}")
