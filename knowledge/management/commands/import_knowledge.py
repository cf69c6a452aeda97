from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from knowledge import services
from knowledge.models import KnowledgeSource
from storyapp.models import Campaign


class Command(BaseCommand):
    help = (
        "Import Markdown or text files, and lorebooks (SillyTavern World Info and character cards, "
        "NovelAI .lorebook/.story/.scenario, AI Dungeon, KoboldAI; read by content), into a campaign's "
        "library, one source per file. Without --wait the index "
        "jobs are queued for the workers; with --wait they run here, and the command exits "
        "non-zero if any file was refused or any source failed."
    )

    def add_arguments(self, parser):
        parser.add_argument("files", nargs="+", metavar="FILE")
        parser.add_argument("--campaign", type=int, required=True, help="Campaign id.")
        parser.add_argument("--class", dest="classification", default=None,
                            choices=KnowledgeSource.Classification.values,
                            help="Default: canon for lorebooks, reference for text.")
        parser.add_argument("--hidden", action="store_true", help="Narrator only.")
        parser.add_argument("--always-include", action="store_true", help="Canon only.")
        parser.add_argument("--wait", action="store_true", help="Index here and wait; needs no worker.")

    def handle(self, *args, files, campaign, classification, hidden, always_include, wait, **options):
        target = Campaign.objects.filter(pk=campaign).first()
        if target is None:
            raise CommandError(f"No campaign with id {campaign}.")
        if always_include and classification is None:
            classification = KnowledgeSource.Classification.CANON
        try:
            services.source_always_include_check(classification=classification, always_include=always_include)
        except services.ImportRefused as exc:
            raise CommandError(f"--always-include: {exc}") from exc
        limit = settings.KNOWLEDGE_MAX_UPLOAD_BYTES
        readable = []
        problems = []
        for name in files:
            path = Path(name)
            if not path.is_file():
                problems.append(f"{name}: no such file.")
            elif path.stat().st_size > limit:
                problems.append(f"{path.name}: the file is over the {services.human_size(limit)} limit.")
            else:
                readable.append((path.name, path.read_bytes()))
        result = services.sources_import(
            campaign=target,
            files=readable,
            classification=classification,
            visibility=KnowledgeSource.Visibility.HIDDEN if hidden else KnowledgeSource.Visibility.VISIBLE,
            always_include=always_include,
            enqueue=not wait,
        )
        problems += result.problems
        for problem in problems:
            self.stderr.write(problem)
        for line in result.reports:
            self.stdout.write(line)
        failed = 0
        for source in result.created:
            if wait:
                source = services.source_index_now(source)
            line = f"#{source.pk} {source.title}: {source.get_index_state_display()}"
            if source.index_state == KnowledgeSource.IndexState.READY:
                line += f", {source.passage_count} passages, {source.token_count} tokens"
                if source.error:
                    line += f". {source.error}"
            elif source.index_state == KnowledgeSource.IndexState.FAILED:
                failed += 1
                line += f": {source.error}"
            self.stdout.write(line)
        if not wait and result.created:
            self.stdout.write(f"Queued {len(result.created)} index job(s) for the workers.")
        if problems or failed:
            raise CommandError(f"{len(problems)} file(s) refused, {failed} source(s) failed.")
