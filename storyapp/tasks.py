from celery import shared_task

from . import narration


@shared_task(acks_late=True, ignore_result=True)
def narrate_action(action_id: int) -> None:
    """Thin wrapper: the claim inside `narrate` makes a redelivery harmless."""
    narration.narrate(action_id)
