"""First-run setup: a demo reader, a model endpoint, and a campaign to play.

The endpoint is found in this order, so a first run narrates with the best
model the machine offers: OPENAI_BASE_URL/OPENAI_API_KEY/OPENAI_MODEL from the
environment; an Ollama or llama.cpp server answering on loopback; else the
scripted demo server, which the run command starts beside web and worker.
"""

from __future__ import annotations

import json
import os
import secrets
import string
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from demomodel.embedding import DIMENSIONS
from endpoints.models import EndpointProfile
from knowledge import services
from knowledge.models import KnowledgeEmbedding, KnowledgeSource

from .models import Campaign

DEMO_USERNAME = "reader"
LOCAL_SERVERS = (
    ("Ollama (local)", "http://127.0.0.1:11434/v1"),
    ("llama.cpp (local)", "http://127.0.0.1:8080/v1"),
)


@dataclass(frozen=True)
class Endpoint:
    name: str
    base_url: str
    model: str
    api_key: str = ""
    scripted_demo: bool = False


def _first_model(base_url: str, *, timeout: float = 0.7) -> str | None:
    """The first model a local OpenAI-compatible server lists, or None if none answers."""
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=timeout) as response:
            listing = json.load(response)
    except (OSError, ValueError):
        return None
    models = [m.get("id") for m in listing.get("data", []) if isinstance(m, dict) and m.get("id")]
    return models[0] if models else None


def find_endpoint(environ: dict[str, str], *, demo_port: int) -> Endpoint:
    base_url = environ.get("OPENAI_BASE_URL", "").strip()
    if base_url or environ.get("OPENAI_API_KEY", "").strip():
        return Endpoint(
            name="From the environment",
            base_url=base_url or "https://api.openai.com/v1",
            model=environ.get("OPENAI_MODEL", "").strip() or "gpt-4o-mini",
            api_key=environ.get("OPENAI_API_KEY", "").strip(),
        )
    for name, url in LOCAL_SERVERS:
        model = _first_model(url)
        if model:
            return Endpoint(name=name, base_url=url, model=model)
    return Endpoint(
        name="Scripted demo (not an AI)",
        base_url=f"http://127.0.0.1:{demo_port}/v1",
        model="demo-narrator",
        scripted_demo=True,
    )


@transaction.atomic
def install_endpoint(found: Endpoint) -> EndpointProfile:
    """Stores the endpoint and makes it the default every unconfigured campaign uses."""
    profile, _ = EndpointProfile.objects.get_or_create(
        name=found.name, defaults={"base_url": found.base_url, "chat_model": found.model}
    )
    profile.base_url = found.base_url
    profile.chat_model = found.model
    profile.is_scripted_demo = found.scripted_demo
    if found.scripted_demo:
        # The demo server embeds too, unless the instance names its own
        # default (the local model): then that one embeds the demo's lore.
        profile.embedding_model = "" if settings.LOREMASTER_EMBEDDING_MODEL.strip() else "demo-embed"
    if found.api_key:
        profile.api_key = found.api_key
    profile.is_default = True
    profile.save()
    EndpointProfile.objects.exclude(pk=profile.pk).update(is_default=False)
    return profile


def reembed_outdated_demo_vectors(profile: EndpointProfile) -> int:
    """Queues a re-embed of the sources whose demo vectors have another width
    than the demo server's now (it went from 384 to 1,024 buckets): vectors of
    two widths cannot be compared, so semantic retrieval would stay off for
    those libraries. Returns how many sources were queued."""
    outdated = (
        KnowledgeEmbedding.objects.filter(model=profile.embedding_model)
        .exclude(dimensions=DIMENSIONS)
        .values_list("chunk__source_id", flat=True)
        .distinct()
    )
    # A source's vectors are re-made when its model differs from its campaign's.
    count = KnowledgeSource.objects.filter(pk__in=list(outdated)).update(embedding_model="")
    if count:
        services.embeddings_refresh_for_profile(profile_id=profile.pk)
    return count


def readable_password(length: int = 12) -> str:
    """Letters and digits only: a reader types it from the terminal, and a leading
    dash (which token_urlsafe can produce) reads as an option to command-line tools."""
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(length))


def ensure_reader(password_file: Path) -> tuple[str, str | None]:
    """The demo login: (username, password), the password None when the reader changed it."""
    User = get_user_model()
    user = User.objects.filter(username=DEMO_USERNAME).first()
    stored = password_file.read_text().strip() if password_file.exists() else ""
    if user is None:
        stored = readable_password()
        User.objects.create_superuser(username=DEMO_USERNAME, email="", password=stored)
        password_file.write_text(stored)
        password_file.chmod(0o600)
        return DEMO_USERNAME, stored
    return DEMO_USERNAME, stored if stored and user.check_password(stored) else None


SALT_ROAD_STATE = {
    "scene": {"summary": "Mara waits at the quay for the harbourmaster.", "location": "Westhaven harbour"},
    "entities": {"aldric": {"name": "Aldric", "aliases": ["the harbourmaster"], "status": "alive"}},
    "threads": {"seal": {"title": "Return the broken seal", "status": "open"}},
}


def ensure_campaign(username: str) -> Campaign:
    owner = get_user_model().objects.get(username=username)
    campaign = Campaign.objects.filter(owner=owner).order_by("id").first()
    if campaign is not None:
        return campaign
    return Campaign.objects.create(
        owner=owner,
        title="The Salt Road",
        ai_instructions="Second person, present tense. Keep scenes grounded and sensory.",
        plot_essentials="Mara carries the broken seal of House Venn. Aldric the harbourmaster knows who broke it.",
        authors_note="Keep the tone grim and salt-stained.",
        persona_name="Mara",
        persona_pronouns="she/her",
        persona_description="A smuggler with a debt to the wrong people.",
        narration_length=Campaign.NarrationLength.MEDIUM,
        canon={"rules": ["Magic always costs blood."], "forbidden_status_changes": [{"from": "dead", "to": "alive"}]},
        initial_state=SALT_ROAD_STATE,
    )


def procfile(*, web_port: int, demo_port: int | None, python: str) -> str:
    lines = [
        # REMOTE_ADDR stays the socket's address: storyapp.addresses reads
        # X-Forwarded-For itself, and only behind a proxy of our own.
        f"web: {python} -m uvicorn storyapp.asgi:application --host 127.0.0.1 --port {web_port} --no-proxy-headers",
        f"worker: {python} -m celery -A storyapp worker --queues=celery --loglevel=INFO --concurrency=2",
        f"narrator: {python} -m celery -A storyapp worker --queues=narration --pool=threads --concurrency=4 "
        "--hostname=narrator@%h --loglevel=INFO",
    ]
    if demo_port is not None:
        lines.append(f"demomodel: {python} manage.py serve_demo_model --port {demo_port}")
    return "\n".join(lines) + "\n"


def environ() -> dict[str, str]:
    return dict(os.environ)
