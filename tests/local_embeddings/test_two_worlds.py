"""Two unrelated worlds in one library (a fantasy harbour, Dunhallow, and a
deep-sea research station, Thetis), with a two-line motto and a hidden file
in each, and 21 scenes written by a helper that had not seen the rules:
paraphrases that share no distinctive word with the passage they need,
scenes rich in words the other world's lore uses too (hot water, salt,
cargo, pressure, crew), off-topic moments and the hidden files. With the
local model: paraphrases admitted, the motto and the hidden files kept out of
unrelated scenes, and no scene crosses into the other world: 17 of 21 do
(the motto is kept out as a hub: knowledge.hubs), and the four that do not
are listed with what crosses."""

from pathlib import Path

import pytest
from django.conf import settings

from endpoints import localembed
from tests.factories import EndpointProfileFactory
from tests.knowledge.scenes import admitted, check

ROOT = Path(__file__).parent.parent / "knowledge" / "evaluation_two_worlds"
SCENES = sorted((ROOT / "scenes").glob("*.json"))

#: Known misses, each strict: a fix must turn them into passes.
KNOWN = {
    "D6_cross_graving_dock_hot_water": "the station's hull passage, on meaning (cosine 0.408) and one word",
    "D9_hidden_not_ropewalk_cable": "the hidden file on Isolde's barge life, cosine 0.45-0.47 with a barge scene",
    "T5_cross_hull_alarm_hot_water": "the harbour's tides (cosine 0.40-0.46) and salt wraiths (three words: crusted, drip, seawater)",
    "T6_cross_descaling_the_hearth": "salt wraiths on four words (crust, hearth, thirty, waking) at cosine 0.24",
}


#: PostgreSQL's stemmer matches "faint" too, so salt wraiths holds three
#: meaningful words (crust, faint, pale), and three stand without meaning's
#: confirmation (knowledge.ranking.admission._vetoed).
ON_POSTGRES = {"T1_paraphrase_shimmering_seabed": "salt wraiths on three words (crust, faint, pale) at cosine 0.26"}


def _params():
    known = KNOWN | (ON_POSTGRES if "postgresql" in settings.DATABASES["default"]["ENGINE"] else {})
    return [
        pytest.param(p, id=p.stem, marks=[pytest.mark.xfail(reason=known[p.stem], strict=True)])
        if p.stem in known
        else pytest.param(p, id=p.stem)
        for p in SCENES
    ]


@pytest.mark.parametrize("path", _params())
def test_each_scene_admits_what_it_needs_from_its_own_world_only(path, alice, model):
    profile = EndpointProfileFactory(base_url=model.base_url, embedding_model=localembed.MINILM)
    check(*admitted(path, alice, profile))
