"""Every instruct template renders a conversation exactly as its format's own
chat template does (tokens and whitespace), from fixtures written from each
format's documentation: the model card's Jinja template, mistral-common's
tokenizer versions, FastChat's Vicuna and Alpaca's repository."""

import pytest

from contextbuild import instruct

CONVERSATION = [
    {"role": "system", "content": "S"},
    {"role": "user", "content": "U1"},
    {"role": "assistant", "content": "A1"},
    {"role": "user", "content": "U2"},
]

EXPECTED = {
    "chatml": "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n"
              "<|im_start|>user\nU2<|im_end|>\n<|im_start|>assistant\n",
    "llama3": "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|>"
              "<|start_header_id|>user<|end_header_id|>\n\nU1<|eot_id|>"
              "<|start_header_id|>assistant<|end_header_id|>\n\nA1<|eot_id|>"
              "<|start_header_id|>user<|end_header_id|>\n\nU2<|eot_id|>"
              "<|start_header_id|>assistant<|end_header_id|>\n\n",
    "llama2": "<s>[INST] <<SYS>>\nS\n<</SYS>>\n\nU1 [/INST] A1 </s><s>[INST] U2 [/INST]",
    "mistral-v1": "<s> [INST] S\n\nU1 [/INST] A1</s> [INST] U2 [/INST]",
    "mistral-v3": "<s>[INST] S\n\nU1[/INST] A1</s>[INST] U2[/INST]",
    "mistral-v3-tekken": "<s>[INST]S\n\nU1[/INST]A1</s>[INST]U2[/INST]",
    "mistral-v7-tekken": "<s>[SYSTEM_PROMPT]S[/SYSTEM_PROMPT][INST]U1[/INST]A1</s>[INST]U2[/INST]",
    "gemma": "<bos><start_of_turn>user\nS\n\nU1<end_of_turn>\n<start_of_turn>model\nA1<end_of_turn>\n"
             "<start_of_turn>user\nU2<end_of_turn>\n<start_of_turn>model\n",
    "phi3": "<|system|>\nS<|end|>\n<|user|>\nU1<|end|>\n<|assistant|>\nA1<|end|>\n<|user|>\nU2<|end|>\n<|assistant|>\n",
    "command-r": "<BOS_TOKEN><|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>S<|END_OF_TURN_TOKEN|>"
                 "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>U1<|END_OF_TURN_TOKEN|>"
                 "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>A1<|END_OF_TURN_TOKEN|>"
                 "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>U2<|END_OF_TURN_TOKEN|>"
                 "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>",
    "alpaca": "S\n\n### Instruction:\nU1\n\n### Response:\nA1\n\n### Instruction:\nU2\n\n### Response:\n",
    "vicuna": "S USER: U1 ASSISTANT: A1</s>USER: U2 ASSISTANT:",
    "metharme": "<|system|>S<|user|>U1<|model|>A1<|user|>U2<|model|>",
    "deepseek": "<｜begin▁of▁sentence｜>S<｜User｜>U1<｜Assistant｜>A1<｜end▁of▁sentence｜><｜User｜>U2<｜Assistant｜>",
    "glm4": "[gMASK]<sop><|system|>\nS<|user|>\nU1<|assistant|>\nA1<|user|>\nU2<|assistant|>",
    "plain": "S\n\nReader: U1\n\nNarrator: A1\n\nReader: U2\n\nNarrator:",
}


def test_every_template_has_its_documented_fixture():
    assert set(EXPECTED) == set(instruct.templates())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_template_renders_the_conversation_exactly(name):
    assert instruct.render(CONVERSATION, name) == EXPECTED[name]


def test_continue_ends_on_the_last_narrations_own_text():
    story = CONVERSATION[:3]
    assert instruct.render(story, "chatml", continue_last=True).endswith("<|im_start|>assistant\nA1")
    assert instruct.render(story, "gemma", continue_last=True).endswith("<start_of_turn>model\nA1")
    with pytest.raises(ValueError):
        instruct.render(CONVERSATION, "chatml", continue_last=True)


def test_a_system_message_inside_the_story_joins_the_next_user_turn_where_there_is_no_system_role():
    story = [*CONVERSATION[:3], {"role": "system", "content": "Lore."}, {"role": "user", "content": "U2"}]
    assert instruct.render(story, "gemma").endswith("<start_of_turn>user\nLore.\n\nU2<end_of_turn>\n<start_of_turn>model\n")
    assert "<|im_start|>system\nLore.<|im_end|>\n<|im_start|>user\nU2" in instruct.render(story, "chatml")


def test_a_closing_system_message_without_a_system_role_joins_the_last_user_turn():
    story = [*CONVERSATION, {"role": "system", "content": "Lore."}]
    assert instruct.render(story, "mistral-v3").endswith("[INST] U2\n\nLore.[/INST]")


def test_contents_are_trimmed_where_the_format_trims_them():
    story = [{"role": "user", "content": "  U1\n"}]
    assert instruct.render(story, "llama3").endswith("user<|end_header_id|>\n\nU1<|eot_id|>"
                                                     "<|start_header_id|>assistant<|end_header_id|>\n\n")
    assert instruct.render(story, "chatml") == "<|im_start|>user\n  U1\n<|im_end|>\n<|im_start|>assistant\n"


def test_an_unknown_template_name_narrates_plain():
    assert instruct.render(CONVERSATION, "gone-since") == EXPECTED["plain"]


def test_every_template_stops_before_the_readers_turn():
    for name, chosen in instruct.templates().items():
        assert chosen.stop, name


@pytest.mark.parametrize(("chat_template", "expected"), [
    ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>{% endfor %}", "chatml"),
    ("{{ bos_token }}<|start_header_id|>{{ role }}<|end_header_id|>\n\n{{ content }}<|eot_id|>", "llama3"),
    ("[INST] <<SYS>>\n{{ system }}\n<</SYS>>\n\n{{ user }} [/INST]", "llama2"),
    ("{{ bos_token }}[SYSTEM_PROMPT]{{ s }}[/SYSTEM_PROMPT][INST]{{ u }}[/INST]", "mistral-v7-tekken"),
    ("{{ bos_token }}[INST] {{ u }}[/INST]", "mistral-v3"),
    ("<start_of_turn>user\n{{ c }}<end_of_turn>\n", "gemma"),
    ("<|user|>\n{{ c }}<|end|>\n<|assistant|>\n", "phi3"),
    ("<|START_OF_TURN_TOKEN|><|USER_TOKEN|>{{ c }}<|END_OF_TURN_TOKEN|>", "command-r"),
    ("<｜User｜>{{ c }}<｜Assistant｜>", "deepseek"),
    ("[gMASK]<sop><|user|>\n{{ c }}<|assistant|>", "glm4"),
    ("<|user|>{{ c }}<|model|>", "metharme"),
])
def test_detection_reads_the_servers_chat_template(chat_template, expected):
    name, why = instruct.detect(chat_template)
    assert name == expected
    assert "chat template" in why


def test_detection_falls_back_to_the_model_name_then_plain():
    assert instruct.detect("", "SmolLM2-135M-Instruct")[0] == "chatml"
    assert instruct.detect("", "Meta-Llama-3.1-8B-Instruct.Q4_K_M")[0] == "llama3"
    assert instruct.detect("", "Mistral-Nemo-Instruct-2407")[0] == "mistral-v3-tekken"
    name, why = instruct.detect("", "gpt2-base")
    assert name == "plain"
    assert "no chat template" in why


@pytest.mark.parametrize(("reply", "kept"), [
    ("Narrator: The gulls wheel.<|im_end|>\n<|im_start|>user\nI go.", "The gulls wheel."),
    ("The gulls wheel.<|eot_id|><|start_header_id|>user<|end_header_id|>", "The gulls wheel."),
    ("The gulls wheel.\nReader: I follow them.", "The gulls wheel."),
    ("The gulls wheel. [INST] Go on [/INST]", "The gulls wheel. "),
    ("The gulls wheel.<end_of_turn>\n<start_of_turn>user", "The gulls wheel."),
    ("A list [1] of <b>bold</b> things, 2 < 3.", "A list [1] of <b>bold</b> things, 2 < 3."),
])
def test_no_template_token_or_reader_turn_survives_in_a_reply(reply, kept):
    assert instruct.trimmed_reply(reply) == kept


@pytest.mark.parametrize(("reply", "kept"), [
    ("The door creaks open.\nTobin: I draw my sword and charge.", "The door creaks open."),
    ("The door creaks open.\n**Mara**: I follow him in.", "The door creaks open."),
    ("The door creaks open.\n  mara : I follow.", "The door creaks open."),
    # A name inside the prose, or another's label, is story.
    ("Mara hears it: a bell.\nTobin's map: torn.", "Mara hears it: a bell.\nTobin's map: torn."),
    ("The door creaks open.\nAldric: Who goes there?", "The door creaks open.\nAldric: Who goes there?"),
    ("Mara: I slip into the tavern.\nSmoke hangs under the beams.\nTobin: I sit.", "Smoke hangs under the beams."),
    ("Mara: I slip into the tavern.", ""),
])
def test_a_line_written_as_a_seat_ends_the_reply(reply, kept):
    """In a shared story the model must never write a player's turn; a
    non-player character's line of dialogue stays."""
    assert instruct.trimmed_reply(reply, speakers=("Mara", "Tobin")) == kept
