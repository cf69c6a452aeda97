import sys
from io import StringIO

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from demomodel import DemoModelServer
from storyapp import demo


class Command(BaseCommand):
    help = (
        "First-run setup: create the demo reader and campaign, find a model endpoint "
        "(environment, then Ollama or llama.cpp on loopback, else the scripted demo server), "
        "print the login, and write the Procfile that `bin/run` starts."
    )

    def add_arguments(self, parser):
        parser.add_argument("--web-port", type=int, default=8000)
        parser.add_argument("--demo-port", type=int, default=8765)
        parser.add_argument("--procfile", default=str(settings.VAR_DIR / "Procfile.run"))

    def handle(self, *args, web_port, demo_port, procfile, **options):
        found = demo.find_endpoint(demo.environ(), demo_port=demo_port)
        profile = demo.install_endpoint(found)
        if found.scripted_demo:
            self._calibrate_demo_embeddings(profile, demo_port)
            demo.reembed_outdated_demo_vectors(profile)
        username, password = demo.ensure_reader(settings.VAR_DIR / "demo-login")
        campaign = demo.ensure_campaign(username)
        with open(procfile, "w") as out:
            out.write(demo.procfile(
                web_port=web_port, demo_port=demo_port if found.scripted_demo else None, python=sys.executable
            ))
        self.stdout.write("")
        self.stdout.write(self.style.SUCCESS(f"Loremaster is starting at http://127.0.0.1:{web_port}/"))
        self.stdout.write(f"  Log in as:  {username}")
        self.stdout.write(f"  Password:   {password or '(you changed it; reset with: manage.py changepassword ' + username + ')'}")
        self.stdout.write(f"  Campaign:   {campaign.title} (#{campaign.pk})")
        self.stdout.write(f"  Narrator:   {profile.name}: {profile.chat_model} at {profile.base_url}")
        if found.scripted_demo:
            self.stdout.write(self.style.WARNING(
                "  No model found, so a scripted demo server narrates (not an AI). "
                "See http://127.0.0.1:%d/models/ to connect one." % web_port
            ))
        self.stdout.write("")

    def _calibrate_demo_embeddings(self, profile, port: int) -> None:
        """Measures the demo embedding model's relevance floor against the
        demo server itself, so semantic retrieval works on a first run. It is
        measured on every run (80 embeddings, deterministic), so the floor
        follows the demo server's code. A real model is calibrated the same
        way, by `calibrate_embeddings`."""
        try:
            with DemoModelServer(port=port, chunk_delay=0):
                call_command(
                    "calibrate_embeddings", model=profile.embedding_model, endpoint=str(profile.pk), stdout=StringIO()
                )
        except (OSError, CommandError) as exc:
            self.stdout.write(self.style.WARNING(f"  Could not calibrate the demo embeddings ({exc}); retrieval stays lexical."))
