"""Hosted mode needs one SECRET_KEY; API keys at rest have their own key,
which rotates (issue 13, finding 10)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command

from endpoints import secrets_at_rest
from tests.factories import EndpointProfileFactory

ROOT = Path(__file__).resolve().parents[2]
SETUP = "import django; django.setup(); from django.conf import settings; print(settings.SECRET_KEY[:4])"


def _start(tmp_path, **env):
    base = {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "DATABASE_URL", "REDIS_URL"}}
    env = {**base, "LOREMASTER_VAR_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "storyapp.settings", **env}
    return subprocess.run([sys.executable, "-c", SETUP], env=env, cwd=ROOT, capture_output=True, text=True)


def test_hosted_mode_refuses_to_start_without_a_secret_key(tmp_path):
    run = _start(tmp_path, DATABASE_URL="postgres://postgres@127.0.0.1:5432/loremaster_unused")
    assert run.returncode != 0
    assert "ImproperlyConfigured: SECRET_KEY is not set" in run.stderr
    assert not (tmp_path / "secret_key").exists()


def test_hosted_mode_starts_with_a_secret_key(tmp_path):
    run = _start(tmp_path, DATABASE_URL="postgres://postgres@127.0.0.1:5432/loremaster_unused",
                 SECRET_KEY="k3y-" + "x" * 60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "k3y-"


def test_the_embedded_default_still_makes_its_own_key(tmp_path):
    run = _start(tmp_path)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "secret_key").exists()


def test_an_encryption_key_that_is_not_a_fernet_key_is_refused_at_start(tmp_path):
    run = _start(tmp_path, LOREMASTER_ENCRYPTION_KEY="not-a-key")
    assert run.returncode != 0
    assert "LOREMASTER_ENCRYPTION_KEY holds a value that is not a Fernet key" in run.stderr


def test_a_value_written_with_an_old_key_still_reads_and_new_writes_use_the_new_key(settings):
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.ENCRYPTION_KEY, settings.ENCRYPTION_OLD_KEYS = old, []
    token = secrets_at_rest.encrypt("sk-old")

    settings.ENCRYPTION_KEY, settings.ENCRYPTION_OLD_KEYS = new, [old]
    assert secrets_at_rest.decrypt(token) == "sk-old"
    fresh = secrets_at_rest.encrypt("sk-new")
    assert Fernet(new.encode()).decrypt(fresh.encode()) == b"sk-new"

    settings.ENCRYPTION_OLD_KEYS = []
    assert secrets_at_rest.decrypt(token) == ""
    assert secrets_at_rest.decrypt(fresh) == "sk-new"


def test_values_written_before_a_key_was_set_still_read(settings):
    """An install that used the key derived from SECRET_KEY keeps its API keys when it sets one of its own."""
    settings.ENCRYPTION_KEY, settings.ENCRYPTION_OLD_KEYS = "", []
    token = secrets_at_rest.encrypt("sk-derived")
    settings.ENCRYPTION_KEY = Fernet.generate_key().decode()
    assert secrets_at_rest.decrypt(token) == "sk-derived"


@pytest.mark.django_db
def test_reencrypt_api_keys_rewrites_every_key_with_the_new_one(settings):
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.ENCRYPTION_KEY, settings.ENCRYPTION_OLD_KEYS = old, []
    profile = EndpointProfileFactory()
    profile.api_key = "sk-rotated"
    profile.save()
    lost = EndpointProfileFactory(api_key_encrypted=Fernet(Fernet.generate_key()).encrypt(b"x").decode())

    settings.ENCRYPTION_KEY, settings.ENCRYPTION_OLD_KEYS = new, [old]
    call_command("reencrypt_api_keys", stdout=open(os.devnull, "w"))

    settings.ENCRYPTION_OLD_KEYS = []
    profile.refresh_from_db()
    assert profile.api_key == "sk-rotated"
    lost_before = lost.api_key_encrypted
    lost.refresh_from_db()
    assert lost.api_key_encrypted == lost_before
