"""Admission against hand-written libraries and realistic scenes.

Four campaigns (a harbour city, a cyberpunk city, a 1920s New England town,
an 1881 silver town) of seven or eight Markdown lore files each, and 28
scenes, each with the files that must be admitted and those that must not:
on-topic scenes, off-topic ones that must retrieve nothing, scenes sharing
only the protagonist's name and everyday words with a hidden file, and
scenes that do need the hidden file. Written by a helper that had not seen
the admission rules. The first 19 scenes scored 2 before the meaningful-word
rule; the 9 marked "heldout" were written after it, and one of them (the
laundry scene) led to the rare-word requirement.
"""

import json
from pathlib import Path

import pytest

from knowledge import retrieval, services
from knowledge.embeddings import for_retrieval
from storyapp import bundle, prompting
from storyapp.models import Action
from storyapp.services import current_state
from tests.knowledge.lore import calibrate

ROOT = Path(__file__).parent / "evaluation"
SCENES = sorted(ROOT.glob("*/scenes/*.json"))

#: The scene is about diving a wreck for the Admiralty, and the hidden file's
#: passage on the Tideseal is about exactly that; the evaluation's author
#: expected it kept out because the scene's key word is elsewhere.
DEBATABLE = {
    "S6_single_term_kelderhaven": "the hidden Tideseal passage shares the scene's wreck-diving subject",
    # The hidden passage lists who else knows the secret, by name, and the
    # sermon scene names two of them; they are not entities in the state.
    "C7_name_only_sermon": "the hidden passage names townsfolk the scene names (Josiah Thayer, Stoddard)",
}


@pytest.fixture(autouse=True)
def fresh_cache():
    retrieval.clear_cache()
    yield
    retrieval.clear_cache()


def _stem(filename: str) -> str:
    return filename.rsplit(".", 1)[0]


def _params(debatable: dict[str, str]):
    return [
        pytest.param(p, id=p.stem, marks=[pytest.mark.xfail(reason=debatable[p.stem], strict=True)])
        if p.stem in debatable
        else pytest.param(p, id=p.stem)
        for p in SCENES
    ]


def _admitted(path: Path, owner, profile=None) -> tuple[dict, set[str], set[str]]:
    """Imports the scene and its library as the commands would, retrieves
    for its position, and returns (scene, admitted files, retrievable files)."""
    scene = json.loads(path.read_text())
    home = path.parent.parent
    campaign = bundle.import_bundle(scene["bundle"], owner=owner)
    if profile is not None:
        campaign.endpoint = profile
        campaign.save(update_fields=["endpoint"])
    sources = json.loads((home / "sources.json").read_text())
    for filename, options in sources.items():
        source = services.source_create(
            campaign=campaign,
            filename=filename,
            text=(home / "lore" / filename).read_text(),
            classification=options["class"],
            visibility="hidden" if options["hidden"] else "visible",
            always_include=options["always"],
            enqueue=False,
        )
        services.source_index_now(source)
    head = Action.objects.filter(pk=campaign.head_id).first()
    inputs = prompting.query_inputs(campaign, position=head, state=current_state(campaign, head))
    result = retrieval.retrieve(campaign_id=campaign.pk, query=inputs, **for_retrieval(profile))
    if profile is not None:
        assert result.semantic_used, result.semantic_note
    admitted = {_stem(c.filename) for c in (*result.candidates, *result.suppressed) if not c.always_include}
    retrievable = {_stem(name) for name, options in sources.items() if not options["always"]}
    return scene, admitted, retrievable


def _check(scene: dict, admitted: set[str], retrievable: set[str]) -> None:
    must = {_stem(name) for name in scene["expect"]["must"]}
    must_not = scene["expect"]["must_not"]
    must_not = retrievable if must_not == ["*"] else {_stem(name) for name in must_not}
    assert must <= admitted, f"{scene['purpose']}: missing {sorted(must - admitted)}"
    assert not admitted & must_not, f"{scene['purpose']}: admitted {sorted(admitted & must_not)}"


@pytest.mark.parametrize("path", _params(DEBATABLE))
def test_lexical_retrieval_admits_what_the_scene_needs_and_nothing_it_must_not(path, alice):
    _check(*_admitted(path, alice))


@pytest.mark.parametrize("path", _params(DEBATABLE))
def test_with_the_demo_embeddings_too(path, alice, endpoint, model):
    """The scripted demo's bag-of-words embeddings, calibrated as on a first
    run: what a reader without a model gets."""
    calibrate(endpoint)
    _check(*_admitted(path, alice, endpoint))
