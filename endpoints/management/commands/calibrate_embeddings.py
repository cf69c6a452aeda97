from copy import copy

import numpy as np
from django.core.management.base import BaseCommand, CommandError
from django.db.models import Q
from django.utils import timezone

from endpoints import calibration, embeddings, localembed
from endpoints.models import EndpointProfile


class Command(BaseCommand):
    help = (
        "Measure the semantic admission floor for an embedding model and record it. "
        "The calibration set shipped in endpoints/data/calibration_pairs.json pairs 40 story "
        "moments with a lore passage each. Related scores: each moment against its own passage; "
        "unrelated scores: each moment against every other topic's passage. The floor is the "
        "midpoint between the unrelated 95th percentile and the related 10th percentile. If the "
        "unrelated p95 reaches the related p10 the distributions overlap too much, nothing is "
        "recorded, and the command fails. Retrieval admits a passage semantically only when its "
        "cosine reaches the floor recorded for exactly the model in use; an uncalibrated model "
        "has its semantic path disabled."
    )

    def add_arguments(self, parser):
        parser.add_argument("--model", required=True, help="The embedding model's name, as the endpoint knows it.")
        parser.add_argument(
            "--endpoint",
            help="Endpoint profile name or id to call; default: a profile using the model, else the default one.",
        )
        parser.add_argument("--dry-run", action="store_true", help="Measure and print, record nothing.")
        parser.add_argument(
            "--ship", action="store_true",
            help="Also write the floor into endpoints/data/calibrations.json, the floors shipped with the app.",
        )

    def handle(self, *args, model, endpoint, dry_run, ship, **options):
        model = model.strip()
        profile = self._profile(model, endpoint)
        probe = copy(profile)
        probe.embedding_model = model
        topics = calibration.topics()
        texts = [t["scene"] for t in topics] + [t["passage"] for t in topics]
        try:
            vectors = [embeddings.from_bytes(v) for v in embeddings.embed(probe, texts)]
        except (embeddings.EmbeddingUnavailable, embeddings.EmbeddingFailed) as exc:
            raise CommandError(str(exc)) from exc
        matrix = np.vstack(vectors)
        measured = calibration.measure(matrix[: len(topics)], matrix[len(topics) :])
        via = "computed in this process" if localembed.is_local(model) else f"via {profile.name} ({profile.base_url})"
        self.stdout.write(f"Model {model} {via}, {len(topics)} topics, vectors of {matrix.shape[1]} numbers")
        self.stdout.write(f"{'':<10}{'pairs':>7}{'min':>8}{'p10':>8}{'median':>8}{'p90':>8}{'p95':>8}{'max':>8}")
        for label, stats in (("related", measured.related), ("unrelated", measured.unrelated)):
            self.stdout.write(
                f"{label:<10}{stats['pairs']:>7}"
                + "".join(f"{stats[k]:>8.3f}" for k in ("min", "p10", "median", "p90", "p95", "max"))
            )
        if measured.floor is None:
            raise CommandError(measured.refusal)
        self.stdout.write(f"floor {measured.floor:.4f} ({calibration.METHOD})")
        if dry_run:
            self.stdout.write("Dry run: nothing recorded.")
            return
        calibration.calibration_record(model=model, measurement=measured, now=timezone.now())
        self.stdout.write(self.style.SUCCESS(f"Recorded the floor for {model}."))
        if ship:
            calibration.ship(model=model, measurement=measured, now=timezone.now())
            self.stdout.write(f"Wrote it to {calibration.SHIPPED}.")

    def _profile(self, model: str, endpoint: str | None) -> EndpointProfile:
        if localembed.is_local(model) and not endpoint:
            return EndpointProfile(name="local", embedding_model=model)
        if endpoint:
            lookup = Q(name=endpoint) | (Q(pk=int(endpoint)) if endpoint.isdigit() else Q())
            profile = EndpointProfile.objects.filter(lookup).order_by("id").first()
            if profile is None:
                raise CommandError(f"No endpoint profile named or numbered “{endpoint}”.")
            return profile
        profile = (
            EndpointProfile.objects.filter(embedding_model=model).order_by("-is_default", "id").first()
            or EndpointProfile.objects.filter(is_default=True).order_by("id").first()
        )
        if profile is None:
            raise CommandError("No endpoint profile uses this model and there is no default one; pass --endpoint.")
        return profile
