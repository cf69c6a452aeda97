"""The always-include rule: only a Canon source may be always included.

The rule and its message live in the source's check constraint; the service
guard asks it. Every way in refuses with that one message: the database, model
validation, the library's forms, the services, the bundle importer and the
import command.
"""

import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import IntegrityError, transaction
from django.urls import reverse

from knowledge import services
from knowledge.models import ALWAYS_INCLUDE_CANON_ONLY, KnowledgeSource
from storyapp.bundle import BundleError
from storyapp.bundle.export import export
from storyapp.bundle.importer import import_bundle
from storyapp.models import Campaign
from tests.factories import CampaignFactory, KnowledgeSourceFactory

RULE = next(c for c in KnowledgeSource._meta.constraints if c.name == ALWAYS_INCLUDE_CANON_ONLY)
MESSAGE = RULE.get_violation_error_message()
HX = {"HTTP_HX_REQUEST": "true"}
LORE = "# Westhaven\n\n## The Harbour\n\nTides run high."


def test_the_constraint_carries_the_message_readers_see():
    assert MESSAGE == "Only Canon sources can be always included."


@pytest.mark.parametrize("classification", ["reference", "inspiration"])
def test_the_database_refuses_a_non_canon_source_that_is_always_included(campaign, classification):
    with pytest.raises(IntegrityError), transaction.atomic():
        KnowledgeSourceFactory(campaign=campaign, classification=classification, always_include=True)
    canon = KnowledgeSourceFactory(campaign=campaign, classification="canon", always_include=True)
    with pytest.raises(IntegrityError), transaction.atomic():
        KnowledgeSource.objects.filter(pk=canon.pk).update(classification=classification)
    assert list(KnowledgeSource.objects.values_list("classification", "always_include")) == [("canon", True)]


def test_model_validation_refuses_with_the_constraints_message_alone(campaign):
    source = KnowledgeSourceFactory.build(campaign=campaign, classification="reference", always_include=True)
    with pytest.raises(ValidationError) as refused:
        source.full_clean()
    assert refused.value.messages == [MESSAGE]


@pytest.mark.parametrize("classification", ["reference", "inspiration"])
def test_the_service_guard_refuses_with_the_constraints_message(db, classification):
    with pytest.raises(services.ImportRefused) as refused:
        services.source_always_include_check(classification=classification, always_include=True)
    assert str(refused.value) == MESSAGE


@pytest.mark.parametrize(("classification", "always"), [("canon", True), ("canon", False), ("reference", False)])
def test_the_service_guard_lets_canon_or_not_always_included_through(db, classification, always):
    services.source_always_include_check(classification=classification, always_include=always)


def test_creating_and_updating_a_source_are_refused_with_the_same_message(campaign):
    with pytest.raises(services.ImportRefused) as created:
        services.source_create(campaign=campaign, filename="a.md", text=LORE, classification="reference",
                               always_include=True)
    source = services.source_create(campaign=campaign, filename="a.md", text=LORE, enqueue=False)
    with pytest.raises(services.ImportRefused) as updated:
        services.source_update(source=source, title="A", classification="inspiration", visibility="visible",
                               always_include=True, enabled=True)
    assert str(created.value) == str(updated.value) == MESSAGE
    source.refresh_from_db()
    assert (source.classification, source.always_include) == ("reference", False)


def test_the_library_row_shows_the_constraints_message(reader, campaign, library):
    source = library(campaign, LORE)
    url = reverse("source_edit", kwargs={"pk": campaign.pk, "source_id": source.pk})
    response = reader.post(url, {"title": "x", "classification": "reference", "visibility": "visible",
                                 "always_include": "on", "enabled": "on"}, **HX)
    assert response.status_code == 400
    assert f'<p class="error refusal" role="alert">{MESSAGE}</p>' in response.content.decode()
    source.refresh_from_db()
    assert not source.always_include and source.title == "Westhaven"


def test_an_upload_is_refused_once_with_the_constraints_message(reader, campaign):
    files = [SimpleUploadedFile(name, LORE.encode() + name.encode(), content_type="text/markdown")
             for name in ("a.md", "b.md")]
    response = reader.post(reverse("library_upload", kwargs={"pk": campaign.pk}), {
        "files": files, "classification": "inspiration", "visibility": "visible", "always_include": "on",
    }, **HX)
    body = response.content.decode()
    assert f'<li class="error">{MESSAGE}</li>' in body and body.count(MESSAGE) == 1
    assert not KnowledgeSource.objects.exists()


def test_a_bundle_is_refused_with_the_same_message_and_writes_nothing(alice):
    document = export(CampaignFactory(owner=alice))
    document["sources"] = [{"title": "Westhaven", "filename": "westhaven.md", "classification": "reference",
                            "always_include": True, "text": LORE}]
    with pytest.raises(BundleError) as refused:
        import_bundle(document, owner=alice)
    assert str(refused.value) == f"sources[0]: {MESSAGE}"
    assert Campaign.objects.count() == 1 and not KnowledgeSource.objects.exists()

