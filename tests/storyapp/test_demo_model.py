"""The demo model through the real `openai` client, over a real socket."""

import base64
import math
import struct
import time

import httpx
import openai
import pytest

from demomodel import DISCLAIMER, REFUSAL, STATE_BLOCK, DemoModelServer
from demomodel.embedding import DIMENSIONS

TURN = [{"role": "system", "content": "You narrate."}, {"role": "user", "content": "I open the door."}]


@pytest.fixture(scope="module")
def api(model_server):
    """One client for the module: building one costs a fifth of a second."""
    with openai.OpenAI(base_url=model_server.base_url, api_key="any", max_retries=0) as client:
        yield client


def chat(api, content="I open the door.", **options):
    messages = [{"role": "user", "content": content}]
    return api.chat.completions.create(model="demo-narrator", messages=messages, **options)


def cosine(a, b):
    return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def test_models_list_names_the_chat_and_embedding_models(api, model):
    assert [m.id for m in api.models.list()] == ["demo-narrator", "demo-embed"]


def test_reply_says_it_is_a_demo_and_ends_with_an_empty_state_block(api, model):
    completion = api.chat.completions.create(model="demo-narrator", messages=TURN)

    choice = completion.choices[0]
    assert DISCLAIMER in choice.message.content
    assert "/models/" in DISCLAIMER
    assert choice.message.content.endswith("\n" + STATE_BLOCK)
    assert choice.finish_reason == "stop"
    assert completion.model == "demo-narrator"
    assert completion.usage.completion_tokens == len(choice.message.content.split())
    assert completion.usage.prompt_tokens == 6


def test_asking_again_gives_a_different_narration_like_a_retry_would(api, model):
    replies = [chat(api, "I open the door.").choices[0].message.content for _ in range(4)]

    assert len(set(replies)) > 1


def test_stream_sends_role_then_small_content_chunks_then_stop(api, model):
    expected = "The tide turns under a bruised sky, and the gulls fall silent one by one as the lamps of Westhaven gutter out."
    model.script({"reply": expected})

    chunks = list(chat(api, stream=True))

    assert chunks[0].choices[0].delta.role == "assistant"
    contents = [c.choices[0].delta.content for c in chunks[1:-1]]
    assert len(contents) > 5
    assert all(len(text.split()) <= 3 for text in contents)
    assert "".join(contents) == expected
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert chunks[-1].object == "chat.completion.chunk"


def test_stream_reports_usage_when_asked(api, model):
    chunks = list(chat(api, stream=True, stream_options={"include_usage": True}))

    assert chunks[-1].choices == []
    assert chunks[-1].usage.completion_tokens > 0


@pytest.mark.parametrize("stream", [False, True])
def test_max_tokens_cuts_the_reply_with_finish_reason_length(api, model, stream):
    if stream:
        chunks = list(chat(api, stream=True, max_tokens=5))
        text = "".join(c.choices[0].delta.content or "" for c in chunks)
        finish = chunks[-1].choices[0].finish_reason
    else:
        choice = chat(api, max_completion_tokens=5).choices[0]
        text, finish = choice.message.content, choice.finish_reason

    assert text == "This is a scripted demo"
    assert finish == "length"


def test_scripted_replies_are_used_in_order_then_the_default_returns(api, model):
    model.script({"reply": "First."}, {"reply": "Second."})

    replies = [chat(api).choices[0].message.content for _ in range(3)]

    assert replies[:2] == ["First.", "Second."]
    assert DISCLAIMER in replies[2]
    assert model.queued() == 0


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (401, openai.AuthenticationError),
        (429, openai.RateLimitError),
        (500, openai.InternalServerError),
        (503, openai.InternalServerError),
    ],
)
def test_scripted_status_raises_the_matching_openai_error(api, model, status, error):
    model.script({"status": status, "message": "scripted trouble"})

    with pytest.raises(error) as raised:
        chat(api)

    assert raised.value.status_code == status
    assert raised.value.body["message"] == "scripted trouble"


def test_rate_limit_carries_retry_after(api, model):
    model.script({"status": 429, "retry_after": 7})

    with pytest.raises(openai.RateLimitError) as raised:
        chat(api, stream=True)

    assert raised.value.response.headers["retry-after"] == "7"
    assert raised.value.code == "rate_limit_exceeded"


@pytest.mark.parametrize("stream", [False, True])
def test_refusal_is_a_200_with_finish_reason_content_filter(api, model, stream):
    model.script({"refuse": True})

    if stream:
        chunks = list(chat(api, stream=True))
        text = "".join(c.choices[0].delta.content or "" for c in chunks)
        finish = chunks[-1].choices[0].finish_reason
    else:
        choice = chat(api).choices[0]
        text, finish = choice.message.content, choice.finish_reason

    assert text == REFUSAL
    assert finish == "content_filter"


def test_cut_stream_fails_while_iterating_after_the_first_characters(api, model):
    model.script({"reply": "one two three four five six seven eight nine ten", "cut_after": 14})
    received = []

    with pytest.raises(openai.APIConnectionError):
        for chunk in chat(api, stream=True):
            received.append(chunk.choices[0].delta.content or "")

    assert "".join(received) == "one two three "


def test_cut_plain_reply_is_a_connection_error(api, model):
    model.script({"cut_after": 10})

    with pytest.raises(openai.APIConnectionError):
        chat(api)


def test_stall_longer_than_the_client_timeout_is_a_timeout(api, model):
    model.script({"stall": 2})
    started = time.monotonic()

    with pytest.raises(openai.APITimeoutError):
        api.with_options(timeout=0.2).chat.completions.create(model="demo-narrator", messages=TURN)

    assert time.monotonic() - started < 1.5


def test_per_chunk_delay_slows_a_stream(api, model):
    model.script({"reply": "one two three four five six seven eight nine", "delay": 0.05})
    started = time.monotonic()

    assert len(list(chat(api, stream=True))) == 5
    assert time.monotonic() - started >= 0.15


@pytest.mark.parametrize(
    ("directive", "error"),
    [
        ("[[demo:429]]", openai.RateLimitError),
        ("[[demo:401]]", openai.AuthenticationError),
        ("[[demo:500]]", openai.InternalServerError),
    ],
)
def test_directive_in_the_last_user_message_triggers_a_failure(api, model, directive, error):
    with pytest.raises(error):
        chat(api, f"I draw my sword. {directive}")


def test_refuse_directive_and_scripted_step_takes_precedence(api, model):
    assert chat(api, "[[demo:refuse]]").choices[0].finish_reason == "content_filter"

    model.script({"reply": "Scripted."})

    assert chat(api, "[[demo:429]]").choices[0].message.content == "Scripted."


def test_request_log_records_what_was_sent(api, model):
    api.chat.completions.create(model="demo-narrator", messages=TURN, max_tokens=50)
    list(chat(api, "Again.", stream=True))
    api.embeddings.create(model="demo-embed", input=["lore"])

    logged = model.requests()
    received = [entry.pop("received") for entry in logged if entry["path"] == "/v1/chat/completions"]
    assert received == sorted(received) and len(received) == 2
    assert logged == [
        {"path": "/v1/chat/completions", "model": "demo-narrator", "messages": TURN, "stream": False, "max_tokens": 50},
        {
            "path": "/v1/chat/completions",
            "model": "demo-narrator",
            "messages": [{"role": "user", "content": "Again."}],
            "stream": True,
            "max_tokens": None,
        },
        {"path": "/v1/embeddings", "model": "demo-embed", "input": ["lore"], "stream": False},
    ]


def test_http_control_api_scripts_and_reports(api, model):
    control = httpx.Client(base_url=model.base_url.removesuffix("/v1"))
    steps = {"steps": [{"status": 503}, {"reply": "Later."}]}

    assert control.post("/_demo/script", json=steps).json() == {"queued": 2}
    with pytest.raises(openai.InternalServerError):
        chat(api)
    assert control.get("/_demo/script").json() == {"queued": 1}
    assert control.delete("/_demo/script").json() == {"queued": 0}
    assert DISCLAIMER in chat(api).choices[0].message.content
    assert [r["stream"] for r in control.get("/_demo/requests").json()] == [False, False]
    control.delete("/_demo/requests")
    assert control.get("/_demo/requests").json() == []


def test_http_control_api_rejects_an_unknown_step(model):
    control = httpx.Client(base_url=model.base_url.removesuffix("/v1"))

    response = control.post("/_demo/script", json={"steps": [{"stauts": 500}]})

    assert response.status_code == 400
    assert "stauts" in response.json()["error"]["message"]
    assert model.queued() == 0


def test_embeddings_are_deterministic_normalised_and_share_words(api, model):
    texts = ["The red dragon sleeps under the mountain.", "A red dragon wakes.", "Quarterly tax forms are due."]

    first = api.embeddings.create(model="demo-embed", input=texts, encoding_format="float")
    again = api.embeddings.create(model="demo-embed", input=texts[0], encoding_format="float")

    dragon, related, unrelated = (item.embedding for item in first.data)
    assert [item.index for item in first.data] == [0, 1, 2]
    assert len(dragon) == DIMENSIONS
    assert again.data[0].embedding == dragon
    assert math.isclose(cosine(dragon, dragon), 1.0, abs_tol=1e-6)
    assert cosine(dragon, related) > 0.3
    assert abs(cosine(dragon, unrelated)) < 0.2


def test_base64_embeddings_are_little_endian_float32(api, model):
    texts = ["lantern light", "stone bridge"]
    floats = api.embeddings.create(model="demo-embed", input=texts, encoding_format="float")

    raw = api.embeddings.with_raw_response.create(
        model="demo-embed", input=texts, encoding_format="base64"
    )
    decoded_by_client = api.embeddings.create(model="demo-embed", input=texts)

    for index, item in enumerate(raw.http_response.json()["data"]):
        vector = list(struct.unpack(f"<{DIMENSIONS}f", base64.b64decode(item["embedding"])))
        assert vector == floats.data[index].embedding
        assert decoded_by_client.data[index].embedding == vector


def test_api_key_is_required_when_configured():
    with DemoModelServer(api_key="sekrit", chunk_delay=0) as server:
        wrong = openai.OpenAI(base_url=server.base_url, api_key="guess", max_retries=0)
        right = openai.OpenAI(base_url=server.base_url, api_key="sekrit", max_retries=0)

        with pytest.raises(openai.AuthenticationError) as raised:
            chat(wrong)

        assert raised.value.code == "invalid_api_key"
        assert server.requests() == []
        assert DISCLAIMER in chat(right).choices[0].message.content


def test_stopped_server_refuses_connections():
    server = DemoModelServer(chunk_delay=0).start()
    base_url = server.base_url
    server.stop()

    with pytest.raises(openai.APIConnectionError):
        openai.OpenAI(base_url=base_url, api_key="any", max_retries=0).models.list()
