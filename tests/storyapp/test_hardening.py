"""Smaller hardening findings of issue 13 (finding 11): the database file's
mode, /models/ behind the login, htmx evaluating nothing, a
Content-Security-Policy. Log-in throttling: tests/storyapp/test_logins.py."""

import base64
import hashlib
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.urls import reverse

from storyapp.middleware import inline_hashes

ROOT = Path(__file__).resolve().parents[2]


def test_the_embedded_database_and_var_are_the_owners_alone(tmp_path):
    var = tmp_path / "var"
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "SECRET_KEY"}}
    env.update(LOREMASTER_VAR_DIR=str(var), DJANGO_SETTINGS_MODULE="storyapp.settings")
    code = "import django; django.setup(); from django.db import connection; connection.ensure_connection()"
    subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, check=True, umask=0o022)
    assert stat.S_IMODE((var / "loremaster.sqlite3").stat().st_mode) == 0o600
    assert stat.S_IMODE(var.stat().st_mode) == 0o700
    assert stat.S_IMODE((var / "secret_key").stat().st_mode) == 0o600


@pytest.mark.django_db
def test_connect_model_needs_a_login(client):
    response = client.get(reverse("connect_model"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


@pytest.mark.django_db
def test_pages_configure_htmx_to_run_and_evaluate_nothing(client, alice):
    client.force_login(alice)
    page = client.get(reverse("campaign_list")).content.decode()
    config = re.search(r"<meta name=\"htmx-config\" content='([^']*)'>", page).group(1)
    assert '"allowScriptTags": false' in config
    assert '"allowEval": false' in config


def test_no_template_uses_an_htmx_trigger_filter():
    """Filters (`event[condition]`) are evaluated JavaScript, which allowEval refuses."""
    for path in (ROOT / "templates").rglob("*.html"):
        assert not re.search(r'hx-trigger="[^"]*\[', path.read_text()), path


@pytest.mark.django_db
def test_every_page_has_a_content_security_policy_of_its_own_scripts(client, alice):
    client.force_login(alice)
    policy = client.get(reverse("campaign_list"))["Content-Security-Policy"]
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    assert directives["script-src"] == "'self'"
    assert directives["style-src"].startswith("'self'")
    assert "unsafe-inline" not in directives["script-src"] + directives["style-src"]
    assert directives["object-src"] == "'none'"
    assert client.get(reverse("login"))["Content-Security-Policy"] == policy


def _sha256(text):
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def test_the_policy_allows_exactly_the_templates_fixed_inline_pieces(tmp_path):
    (tmp_path / "a.html").write_text('<style>p { color: red; }</style><style>{{ x }}</style>'
                                     '<button onclick="this.remove(&quot;a&quot;)">x</button><b onclick="{{ y }}"></b>')
    assert inline_hashes([tmp_path]) == ([_sha256("p { color: red; }")], [_sha256('this.remove("a")')])
