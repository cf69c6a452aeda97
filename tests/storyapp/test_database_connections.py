"""Hosted mode keeps no PostgreSQL connection open between requests (issue 13, finding 1)."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_hosted_mode_closes_each_connection_after_its_request(tmp_path):
    env = {**os.environ, "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/loremaster_unused",
           "SECRET_KEY": "a-test-key-that-is-long-enough-for-django-to-accept-it-0123456789",
           "LOREMASTER_VAR_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "storyapp.settings"}
    code = "import json; from django.conf import settings; print(json.dumps(settings.DATABASES['default']['CONN_MAX_AGE']))"
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == 0
