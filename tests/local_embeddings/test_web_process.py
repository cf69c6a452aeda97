"""The web process never loads PyTorch, with the local model chosen and
installed: its pages only ask whether it is installed (endpoints.localembed)."""

import subprocess
import sys
from pathlib import Path

SCRIPT = """
import os, sys
os.environ["DJANGO_SETTINGS_MODULE"] = "storyapp.settings"
from storyapp.asgi import application  # a web process, as uvicorn starts it
from django.core.management import call_command
call_command("migrate", verbosity=0)
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from endpoints.models import EndpointProfile
from storyapp.models import Campaign
admin = get_user_model().objects.create(username="root", is_staff=True, is_superuser=True)
profile = EndpointProfile.objects.create(name="local", base_url="http://127.0.0.1:9/v1", chat_model="m",
                                         embedding_model="local:all-MiniLM-L6-v2", is_default=True)
campaign = Campaign.objects.create(owner=admin, title="Web", endpoint=profile)
client = Client(HTTP_HOST="127.0.0.1")
client.force_login(admin)
pages = [
    reverse("admin:endpoints_endpointprofile_change", args=[profile.pk]),
    reverse("campaign_play", kwargs={"pk": campaign.pk}),
    reverse("library", kwargs={"pk": campaign.pk}),
]
for page in pages:
    assert client.get(page).status_code == 200, page
upload = client.post(reverse("library_upload", kwargs={"pk": campaign.pk}),
                     {"files": [open(sys.argv[1], "rb")], "classification": "canon", "visibility": "visible"})
assert upload.status_code in (200, 302), upload.status_code
print("torch loaded" if "torch" in sys.modules else "no torch")
"""


def test_pages_and_an_upload_with_the_local_model_chosen_never_load_pytorch(tmp_path):
    lore = tmp_path / "lore.md"
    lore.write_text("# Salt wraiths\\n\\nPale drowned sailors drawn to fire.\\n")
    root = Path(__file__).resolve().parents[2]
    env = {"PATH": "/usr/bin:/bin", "LOREMASTER_VAR_DIR": str(tmp_path / "var"), "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(lore)], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "no torch"
