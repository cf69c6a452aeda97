"""The one way a view gets a reader's object: filtered by owner, 404 otherwise.

Another reader's campaign answers exactly like one that does not exist, so a
guessed id confirms nothing. The library pages filter through the same
`Campaign.objects.of_reader`.
"""

from django.http import HttpRequest
from django.shortcuts import get_object_or_404

from .models import Action, Campaign


def campaign_for(request: HttpRequest, pk: int) -> Campaign:
    return get_object_or_404(Campaign.objects.of_reader(request.user), pk=pk)


def action_for(request: HttpRequest, pk: int, action_id: int) -> Action:
    return get_object_or_404(Action, pk=action_id, campaign_id=pk, campaign__owner=request.user)
