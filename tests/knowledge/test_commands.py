"""import_knowledge and reindex_knowledge."""

import pytest
from django.core.management import CommandError, call_command

from knowledge.models import IndexJob, KnowledgeSource


@pytest.fixture
def files(tmp_path):
    def make(**contents):
        paths = []
        for name, text in contents.items():
            path = tmp_path / name.replace("_", ".", 1)
            path.write_bytes(text.encode() if isinstance(text, str) else text)
            paths.append(str(path))
        return paths

    return make


def test_import_with_wait_indexes_here_and_reports(campaign, files, capsys):
    paths = files(westhaven_md="# Westhaven\n\n## Harbour\n\nTides.", notes_txt="Salt road notes.")
    call_command("import_knowledge", "--campaign", str(campaign.pk), "--class", "canon", "--hidden",
                 "--always-include", "--wait", *paths)
    assert set(KnowledgeSource.objects.values_list("title", "index_state", "visibility", "always_include")) == {
        ("Westhaven", "ready", "hidden", True), ("notes", "ready", "hidden", True)}
    assert "ready" in capsys.readouterr().out.lower()


def test_import_without_wait_queues_jobs_for_the_workers(campaign, files):
    """The test's transaction never commits, so the queued job is not sent
    (and not run eagerly): what is left is what a worker would pick up."""
    call_command("import_knowledge", "--campaign", str(campaign.pk), "--class", "reference",
                 *files(a_md="# A\n\nText."))
    assert KnowledgeSource.objects.get().index_state == KnowledgeSource.IndexState.PENDING
    assert IndexJob.objects.get().state == IndexJob.State.QUEUED


def test_import_exits_non_zero_when_a_file_is_refused(campaign, files):
    paths = files(good_md="# Good\n\nText.", bad_md=b"\xff\xfe\x00bad")
    with pytest.raises(CommandError, match="1 file"):
        call_command("import_knowledge", "--campaign", str(campaign.pk), "--class", "reference", "--wait", *paths)
    assert list(KnowledgeSource.objects.values_list("title", flat=True)) == ["Good"]


def test_a_broken_embedding_model_leaves_the_import_ready_lexically_and_says_why(embedded_campaign, model, files, capsys):
    model.script_embeddings({"status": 404})
    call_command("import_knowledge", "--campaign", str(embedded_campaign.pk), "--class", "reference",
                 "--wait", *files(a_md="# A\n\nText."))
    assert KnowledgeSource.objects.get().index_state == KnowledgeSource.IndexState.READY
    assert "Semantic search is off for this file" in capsys.readouterr().out


def test_import_refuses_always_include_outside_canon(campaign, files):
    with pytest.raises(CommandError) as refused:
        call_command("import_knowledge", "--campaign", str(campaign.pk), "--class", "reference",
                     "--always-include", *files(a_md="Text."))
    assert str(refused.value) == "--always-include: Only Canon sources can be always included."
    assert not KnowledgeSource.objects.exists()


def test_import_into_a_missing_campaign_is_an_error(db, files):
    with pytest.raises(CommandError, match="No campaign"):
        call_command("import_knowledge", "--campaign", "999999", "--class", "canon", *files(a_md="Text."))


def test_reindex_rebuilds_a_campaigns_sources(campaign, library):
    source = library(campaign, "# A\n\nText.")
    call_command("reindex_knowledge", "--campaign", str(campaign.pk), "--wait")
    assert source.jobs.filter(state=IndexJob.State.DONE).count() == 2
    source.refresh_from_db()
    assert source.index_state == KnowledgeSource.IndexState.READY
