"""A turn through the real stack: uvicorn, a Celery worker, the demo model
over HTTP, the page's SSE stream. Generation belongs to the server: a reader
who leaves mid-narration comes back to the whole of it, stored once."""

import asyncio
import html
import re

import httpx
import pytest

from ops.models import WorkerHeartbeat
from storyapp.models import Action
from tests import live
from tests.factories import CampaignFactory

pytestmark = pytest.mark.django_db(transaction=True)

REPLY = " ".join(f"word{n}" for n in range(60)) + "\n<state>{\"events\": []}</state>"


@pytest.fixture
def stack(alice, endpoint):
    campaign = CampaignFactory(owner=alice, endpoint=endpoint)
    with live.web_server() as base, live.worker():
        yield base, campaign


def _submit(client: httpx.Client, campaign, text: str) -> str:
    response = client.post(
        f"/campaigns/{campaign.pk}/turn/", data={"text": text},
        headers={"HX-Request": "true", "X-CSRFToken": client.cookies["csrftoken"]},
    )
    assert response.status_code == 200
    assert "turn-accepted" in response.headers.get("HX-Trigger", "")
    return re.search(r'sse-connect="([^"]+)"', response.text).group(1).replace("&amp;", "&")


def _chunks(client: httpx.Client, url: str, *, stop_after: int | None = None) -> list[str]:
    chunks = []
    with client.stream("GET", url) as response:
        event = None
        for line in response.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event == "chunk":
                chunks.append(html.unescape(line[6:]))
            elif line == "" and event == "done":
                break
            if stop_after is not None and len(chunks) >= stop_after:
                break
    return chunks


def test_a_turn_streams_into_the_page_and_is_stored_once(stack, model):
    base, campaign = stack
    model.script({"reply": REPLY, "delay": 0.03})
    client = live.logged_in(base, campaign.owner)
    chunks = _chunks(client, _submit(client, campaign, "I walk to the quay."))
    narration = Action.objects.get(campaign=campaign, kind=Action.Kind.AI)
    assert narration.status == Action.Status.DONE
    assert len(chunks) > 1
    assert "".join(chunks).strip() == narration.text == REPLY.split("\n<state>")[0]
    assert narration.snapshot.report["sections"]


def test_leaving_mid_narration_and_coming_back_shows_all_of_it(stack, model):
    base, campaign = stack
    model.script({"reply": REPLY, "delay": 0.05})
    client = live.logged_in(base, campaign.owner)
    url = _submit(client, campaign, "I wait.")
    assert _chunks(client, url, stop_after=1)
    client.close()
    narration = live.wait_for(
        lambda: Action.objects.filter(campaign=campaign, kind=Action.Kind.AI, status=Action.Status.DONE).first()
    )
    again = live.logged_in(base, campaign.owner)
    page = again.get(f"/campaigns/{campaign.pk}/").text
    assert page.count("word59") == 1
    assert narration.text == REPLY.split("\n<state>")[0]
    assert len([r for r in model.requests() if r["path"].endswith("/chat/completions")]) == 1


def test_twenty_readers_follow_one_narration_at_once(stack, model):
    base, campaign = stack
    model.script({"reply": REPLY, "delay": 0.05})
    client = live.logged_in(base, campaign.owner)
    url = _submit(client, campaign, "Everyone watches.")

    async def follow() -> str:
        async with httpx.AsyncClient(base_url=base, cookies=client.cookies, timeout=60) as reader:
            text, event = [], None
            async with reader.stream("GET", url) as response:
                async for line in response.aiter_lines():
                    if line.startswith("event: "):
                        event = line[7:]
                    elif line.startswith("data: ") and event == "chunk":
                        text.append(html.unescape(line[6:]))
                    elif line == "" and event == "done":
                        break
            return "".join(text).strip()

    async def everyone():
        return await asyncio.gather(*(follow() for _ in range(20)))

    texts = asyncio.run(everyone())
    stored = Action.objects.get(campaign=campaign, kind=Action.Kind.AI).text
    assert texts == [stored] * 20


def test_a_real_worker_reports_its_queues_and_the_instance_becomes_ready(stack):
    base, _ = stack
    beat = live.wait_for(lambda: WorkerHeartbeat.objects.exclude(queues="").first(), timeout=30)
    assert set(beat.queues.split(",")) == {"celery", "narration"}
    response = httpx.get(f"{base}/readyz", timeout=10)
    assert response.status_code == 200, response.text
