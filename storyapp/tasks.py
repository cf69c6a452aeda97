from celery import shared_task

from . import narration, prompting
from .models import EndpointProfile


@shared_task(acks_late=True, ignore_result=True)
def narrate_action(action_id: int) -> None:
    """Thin wrapper: the claim inside `narrate` makes a redelivery harmless."""
    narration.narrate(action_id)


@shared_task(ignore_result=True)
def probe_endpoint(profile_id: int) -> None:
    """Asks a saved profile's server what it accepts, so the first turn
    need not; a profile deleted meanwhile is nothing to probe."""
    profile = EndpointProfile.objects.filter(pk=profile_id).first()
    if profile is not None:
        prompting.probed(profile)
