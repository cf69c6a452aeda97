"""Running a hand-written evaluation scene: import its bundle and its
library as the commands would, retrieve for its position, and check what was
admitted against what the scene's author expected."""

import json
from pathlib import Path

from endpoints.embeddings import for_retrieval
from knowledge import retrieval, services
from storyapp import prompting
from storyapp.bundle.importer import import_bundle
from storyapp.models import Action


def stem(filename: str) -> str:
    return filename.rsplit(".", 1)[0]


def admitted(path: Path, owner, profile=None) -> tuple[dict, set[str], set[str]]:
    """Imports the scene and its library as the commands would, retrieves
    for its position, and returns (scene, admitted files, retrievable files)."""
    scene = json.loads(path.read_text())
    home = path.parent.parent
    campaign = import_bundle(scene["bundle"], owner=owner)
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
    inputs = prompting.query_inputs(campaign, position=head, state=campaign.state_at(head))
    result = retrieval.retrieve(campaign_id=campaign.pk, query=inputs, **for_retrieval(profile))
    if profile is not None:
        assert result.semantic_used, result.semantic_note
    found = {stem(c.filename) for c in (*result.candidates, *result.suppressed) if not c.always_include}
    retrievable = {stem(name) for name, options in sources.items() if not options["always"]}
    return scene, found, retrievable


def check(scene: dict, found: set[str], retrievable: set[str]) -> None:
    must = {stem(name) for name in scene["expect"]["must"]}
    must_not = scene["expect"]["must_not"]
    must_not = retrievable if must_not == ["*"] else {stem(name) for name in must_not}
    assert must <= found, f"{scene['purpose']}: missing {sorted(must - found)}"
    assert not found & must_not, f"{scene['purpose']}: admitted {sorted(found & must_not)}"
