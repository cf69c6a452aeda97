"""Serve the scripted demo model, for a first run with no real model."""

import ipaddress

from django.core.management.base import BaseCommand

from demomodel import DemoModelServer


class Command(BaseCommand):
    help = (
        "Serve the scripted, OpenAI-compatible demo model. Every narration says "
        "it is a demo; /models/ explains how to connect a real model."
    )
    # It touches neither the database nor the models, and should start at once.
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=8001)
        parser.add_argument(
            "--host",
            default="127.0.0.1",
            help="Interface to bind. Anything but loopback lets other machines "
            "script this server's failures, so it is never the default.",
        )
        parser.add_argument("--api-key", help="Require this bearer token on every request.")
        parser.add_argument(
            "--chunk-delay",
            type=float,
            default=0.03,
            help="Seconds between streamed chunks, so streaming is visible.",
        )

    def handle(self, *, host, port, api_key, chunk_delay, **options):
        if not _is_loopback(host):
            self.stderr.write(
                self.style.WARNING(f"Binding {host}: the demo model's control API is reachable from other machines.")
            )
        server = DemoModelServer(
            host=host, port=port, api_key=api_key, chunk_delay=chunk_delay, log_requests=True
        )
        server.listen()
        self.stdout.write(f"Demo model (scripted, not an AI) at {server.base_url}")
        self.stdout.flush()
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
