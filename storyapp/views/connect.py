"""How to connect a real model, the page the scripted demo links to."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse


@login_required
def connect_model(request: HttpRequest) -> HttpResponse:
    """How to connect a real model; linked from every scripted demo narration."""
    return render(request, "storyapp/connect_model.html", {"admin_url": reverse("admin:endpoints_endpointprofile_changelist")})
