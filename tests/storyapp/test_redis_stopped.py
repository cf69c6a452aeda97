"""Redis stopped under a live server mid-session (issue 23, findings 5 and
9): the reader keeps reading and a turn is kept with a message. A Redis of
the test's own, on a port of its own, so the shared one is never touched."""

import re
import shutil
import subprocess

import pytest

from storyapp.models import Action
from tests import live
from tests.factories import CampaignFactory

pytestmark = pytest.mark.django_db(transaction=True)

REDIS_PORT = 6391


def _redis(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["redis-cli", "-p", str(REDIS_PORT), *args], capture_output=True, text=True, timeout=10)


@pytest.fixture
def stack(alice, endpoint):
    if not shutil.which("redis-server"):
        pytest.skip("redis-server is not installed")
    subprocess.run(["redis-server", "--port", str(REDIS_PORT), "--save", "", "--appendonly", "no",
                    "--daemonize", "yes"], check=True, timeout=10)
    live.wait_for(lambda: _redis("ping").stdout.strip() == "PONG", timeout=10)
    campaign = CampaignFactory(owner=alice, endpoint=endpoint)
    try:
        with live.web_server(port=8532, env={"REDIS_URL": f"redis://127.0.0.1:{REDIS_PORT}/0"}) as base:
            yield base, campaign
    finally:
        _redis("shutdown", "nosave")


def test_a_reader_reads_on_and_a_turn_is_kept_while_redis_is_stopped(stack):
    base, campaign = stack
    client = live.logged_in(base, campaign.owner)
    assert client.get(f"/campaigns/{campaign.pk}/").status_code == 200
    _redis("shutdown", "nosave")
    for page in ("/campaigns/", f"/campaigns/{campaign.pk}/", f"/campaigns/{campaign.pk}/library/"):
        assert client.get(page).status_code == 200, page
    response = client.post(f"/campaigns/{campaign.pk}/turn/", data={"text": "I light the lamp."},
                           headers={"HX-Request": "true", "X-CSRFToken": client.cookies["csrftoken"]})
    assert response.status_code == 200
    assert "narration service is unavailable" in response.text
    narration = Action.objects.get(campaign=campaign, kind=Action.Kind.AI)
    assert narration.status == Action.Status.PENDING and narration.parent.text == "I light the lamp."
    stream = re.search(r'sse-connect="([^"]+)"', response.text).group(1).replace("&amp;", "&")
    with client.stream("GET", stream) as events:
        assert events.status_code == 200
        status = next(line for line in events.iter_lines() if line.startswith("data: "))
    assert "narration service is unavailable" in status
