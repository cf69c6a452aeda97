"""The retrieval query and lexical admission: pure, no database."""

import pytest

from contextbuild.tokens import count_tokens
from knowledge import query
from knowledge.query import QueryInputs, assemble, vocabulary
from knowledge.query.weighing import lexical_admits, why_not_admitted

STATE = {
    "scene": {"summary": "Mara waits at the quay for the harbourmaster.", "location": "Westhaven harbour"},
    "entities": {"aldric": {"name": "Aldric", "aliases": ["the harbourmaster"], "status": "alive"}},
    "threads": {
        "seal": {"title": "Return the broken seal", "status": "open"},
        "old": {"title": "Find the lost lantern", "status": "resolved"},
    },
}


def built(recent=(), **kw):
    return assemble(QueryInputs.build(state=STATE, recent=list(recent), persona_name="Mara", **kw))


def index(q, word):
    return q.terms.index(word)


@pytest.mark.parametrize("word", ["the", "and", "you", "your", "says", "said", "would", "through", "something"])
def test_common_words_never_become_terms(word):
    assert word in vocabulary.STOPWORDS
    assert word not in vocabulary.terms(f"{word} {word} lantern")
    assert vocabulary.terms(f"{word} lantern") == ["lantern"]


def test_the_stopword_list_is_several_hundred_words():
    assert len(vocabulary.STOPWORDS) > 400


def test_the_query_reads_scene_location_entities_aliases_open_threads_and_the_story():
    q = built(["You climb the stair to the lighthouse."])
    for word in ("quay", "westhaven", "harbour", "aldric", "harbourmaster", "seal", "lighthouse", "mara"):
        assert word in q.terms
    assert "lost" not in q.terms and "lantern" not in q.terms  # a resolved thread
    assert "Westhaven harbour" in q.text and "lighthouse" in q.text


def test_inflections_are_one_term():
    assert vocabulary.terms("harbour harbours tides tide bridges bridge") == ["harbour", "tides", "bridges"]


def test_only_the_newest_four_actions_and_600_tokens_of_story_are_read():
    recent = [f"Ancient{n} ruin." for n in range(6)]
    q = built(recent)
    assert "ancient0" not in q.terms and "ancient1" not in q.terms and "ancient5" in q.terms
    long = built(["dragon " * 2000 + "finale"])
    assert count_tokens(long.text) < 700 and "finale" in long.terms


def test_a_pending_reader_action_is_the_newest_of_the_four():
    q = built([f"Ancient{n} ruin." for n in range(4)], player_text="I ring the bell.")
    assert "bell" in q.terms and "ancient0" not in q.terms and "ancient1" in q.terms


def test_the_terms_are_bounded():
    q = built([" ".join(f"word{n}x" for n in range(300))])
    assert len(q.terms) == query.MAX_TERMS


def test_a_name_and_its_alias_are_one_standing_signal():
    q = built(["Aldric the harbourmaster nods."])
    both = {index(q, "aldric"), index(q, "harbourmaster")}
    assert not lexical_admits(both, q.terms, q.standing, q.shares)


def test_lone_standing_matches_never_admit_however_many():
    state = dict(STATE, entities={**STATE["entities"], "venn": {"name": "House Venn", "aliases": ["the Venns"]}})
    q = assemble(QueryInputs.build(state=state, recent=["Mara, Aldric and the Venns."], persona_name="Mara"))
    matched = {index(q, w) for w in ("mara", "aldric", "harbourmaster", "house", "venn")}
    assert not lexical_admits(matched, q.terms, q.standing, q.shares)


def test_a_standing_entity_never_counts_even_beside_a_meaningful_term():
    """The protagonist's name plus one incidental word is still her name alone."""
    q = built(["Aldric looks at the lighthouse while the smugglers row past."])
    assert not lexical_admits({index(q, "aldric"), index(q, "lighthouse")}, q.terms, q.standing, q.shares)
    assert lexical_admits(
        {index(q, "aldric"), index(q, "lighthouse"), index(q, "smugglers")}, q.terms, q.standing, q.shares
    )


def test_everyday_english_words_never_admit():
    q = built(["Years later the real people sell the house and pay the smugglers for lighthouse oil."])
    everyday = {index(q, w) for w in ("years", "real", "people", "sell", "house", "pay")}
    assert not lexical_admits(everyday, q.terms, q.standing, q.shares)
    assert why_not_admitted(everyday, q.terms, q.standing).startswith("common words, which never admit")
    assert lexical_admits(everyday | {index(q, "lighthouse"), index(q, "smugglers")}, q.terms, q.standing, q.shares)


def test_two_middling_words_do_not_admit_without_a_rare_one():
    """A laundry scene's "hang" and "pocket" once admitted a hidden file about a hanging."""
    q = built(["You hang the wet shirts and find a coin in a pocket while the smugglers row past."])
    middling = {index(q, "hang"), index(q, "pocket")}
    assert not lexical_admits(middling, q.terms, q.standing, q.shares)
    assert "none is a rare word" in why_not_admitted(middling, q.terms, q.standing)
    assert lexical_admits({index(q, "hang"), index(q, "smugglers")}, q.terms, q.standing, q.shares)


def test_an_inflection_is_as_common_as_its_word():
    q = built(["The thief was hanged with coins in his pockets."])
    assert not lexical_admits({index(q, "hanged"), index(q, "pockets")}, q.terms, q.standing, q.shares)


def test_words_common_in_the_library_never_admit():
    q = built(["The lighthouse keeper trims the wick."])
    pair = {index(q, "lighthouse"), index(q, "keeper")}
    assert lexical_admits(pair, q.terms, q.standing, q.shares, distinctive={index(q, "keeper")}) is False
    assert lexical_admits(pair, q.terms, q.standing, q.shares, distinctive=pair)


def test_two_distinct_terms_admit_and_one_common_one_does_not():
    q = built(["The lighthouse keeper trims the wick."])
    assert lexical_admits({index(q, "lighthouse"), index(q, "keeper")}, q.terms, q.standing, q.shares)
    assert not lexical_admits({index(q, "lighthouse")}, q.terms, q.standing, q.shares)


def test_one_distinctive_term_carrying_the_query_admits():
    q = assemble(QueryInputs.build(state={"scene": {"location": "Westhaven"}}, recent=["Westhaven wakes."]))
    assert q.terms[0] == "westhaven"
    assert lexical_admits({0}, q.terms, q.standing, q.shares)


def test_the_standing_groups_are_the_persona_and_each_entity():
    groups = query.standing_groups(STATE, "Mara Venn")
    assert groups == (frozenset({"mara", "venn"}), frozenset({"aldric", "harbourmaster"}))


@pytest.mark.parametrize(
    ("heading", "text"),
    [
        ("Westhaven > The Harbour", "The harbourmaster's ledgers (1,204 of them) lie_under the quay; Aldric-Vane said so."),
        ("", "Tides: HIGH at 06:40, low at 12:55... e-mail the_keeper@lighthouse.example!"),
        ("Kelderhaven", "Smugglers’ coves — “the Tideseal” — and the café on Rue d’Été."),
        ("", "naïve façade, Ünterberg's ørsted tables and 北港 harbour"),
        ("", ""),
    ],
)
def test_a_passages_word_keys_are_the_word_expressions_whatever_its_alphabet(heading, text):
    """ASCII text takes a faster path; it must find exactly the words the
    expression finds, stop words and short words dropped alike."""
    expected = {vocabulary._word_key(w) for w in vocabulary.WORD.findall(f"{heading} {text}".lower())} - {None}
    assert vocabulary.passage_keys(heading, text) == expected
    assert vocabulary.passage_keys(heading, text) == expected, "the second call answers from the cache alike"
