from celery import shared_task

from . import window
from .models import EndpointProfile


@shared_task(ignore_result=True)
def probe_endpoint(profile_id: int) -> None:
    """Asks a saved profile's server what it accepts, so the first turn
    need not; a profile deleted meanwhile is nothing to probe."""
    profile = EndpointProfile.objects.filter(pk=profile_id).first()
    if profile is not None:
        window.probed(profile)
