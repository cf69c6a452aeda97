"""A reasoning model's thinking is told apart from its narration in every
shape servers send it (endpoints.reasoning)."""

from endpoints import reasoning


def test_a_think_block_before_the_narration_is_thinking():
    thought = reasoning.split("<think>\nThe reader wants the quay.\n</think>\n\nGulls wheel over the quay.")
    assert thought.thinking == "The reader wants the quay."
    assert thought.prose == "Gulls wheel over the quay."
    assert not thought.unfinished


def test_a_reply_still_inside_its_thinking_has_no_prose_yet():
    thought = reasoning.split("  <think>Let me consider the tide")
    assert thought.prose == "" and thought.unfinished
    assert thought.thinking == "Let me consider the tide"


def test_a_block_the_template_opened_ends_at_its_closing_tag():
    thought = reasoning.split("The reader wants the quay, so I describe it.</think>Gulls wheel over the quay.")
    assert thought.thinking == "The reader wants the quay, so I describe it."
    assert thought.prose == "Gulls wheel over the quay."


def test_half_an_opening_tag_is_held_back():
    assert reasoning.split("<thi").prose == ""
    assert reasoning.split("<think").prose == ""


def test_a_later_block_is_taken_out_of_the_prose():
    thought = reasoning.split("Gulls wheel.<think>more?</think> The tide turns.")
    assert thought.prose == "Gulls wheel. The tide turns."
    assert thought.thinking == "more?"


def test_a_reply_without_thinking_is_all_prose():
    thought = reasoning.split("Gulls wheel over the quay. 2 < 3 and </thing> stay.")
    assert thought == reasoning.Split(thinking="", prose="Gulls wheel over the quay. 2 < 3 and </thing> stay.")
    assert reasoning.visible("<think>x</think> A summary.") == "A summary."
