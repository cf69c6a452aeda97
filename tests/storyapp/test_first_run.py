"""The first run: a demo reader, a campaign, and the best model the machine offers."""

from io import StringIO

from django.contrib.auth import get_user_model
from django.core.management import call_command

from endpoints.models import EmbeddingCalibration, EndpointProfile
from storyapp import demo
from storyapp.models import Campaign
from tests.live import free_port


def test_the_environment_names_the_model_first(monkeypatch):
    monkeypatch.setattr(demo, "LOCAL_SERVERS", ())
    found = demo.find_endpoint(
        {"OPENAI_BASE_URL": "http://127.0.0.1:9999/v1", "OPENAI_API_KEY": "sk-x", "OPENAI_MODEL": "m"}, demo_port=1
    )
    assert (found.base_url, found.model, found.api_key, found.scripted_demo) == ("http://127.0.0.1:9999/v1", "m", "sk-x", False)


def test_a_local_server_answering_on_loopback_is_used_next(monkeypatch, model):
    monkeypatch.setattr(demo, "LOCAL_SERVERS", (("Ollama (local)", model.base_url),))
    found = demo.find_endpoint({}, demo_port=1)
    assert (found.name, found.model, found.scripted_demo) == ("Ollama (local)", "demo-narrator", False)


def test_with_no_model_the_scripted_demo_runs_beside_web_and_worker(db, monkeypatch, tmp_path):
    monkeypatch.setattr(demo, "LOCAL_SERVERS", ())
    monkeypatch.setattr(demo, "environ", lambda: {})
    port = free_port()
    procfile = tmp_path / "Procfile"
    out = StringIO()
    call_command("setup_demo", web_port=8000, demo_port=port, procfile=str(procfile), stdout=out)
    printed = out.getvalue()
    password = printed.split("Password:")[1].split()[0]
    assert get_user_model().objects.get(username="reader").check_password(password)
    assert password.isalnum(), "a printed password is typed and passed to tools; a leading dash reads as an option"
    assert f"serve_demo_model --port {port}" in procfile.read_text()
    profile = EndpointProfile.objects.get(is_default=True)
    assert profile.is_scripted_demo and profile.base_url == f"http://127.0.0.1:{port}/v1"
    assert Campaign.objects.get().owner.username == "reader"
    assert EmbeddingCalibration.objects.filter(model="demo-embed").exists()
    call_command("setup_demo", web_port=8000, demo_port=port, procfile=str(procfile), stdout=StringIO())
    assert Campaign.objects.count() == 1 and EndpointProfile.objects.count() == 1


def test_demo_vectors_of_an_older_width_are_re_embedded_on_setup(alice, endpoint, django_capture_on_commit_callbacks):
    from demomodel.embedding import DIMENSIONS
    from knowledge import services
    from knowledge.models import KnowledgeEmbedding
    from tests.factories import CampaignFactory

    campaign = CampaignFactory(owner=alice, endpoint=endpoint)
    source = services.source_create(campaign=campaign, filename="a.md", text="# Quay\n\nSmugglers.", enqueue=False)
    services.source_index_now(source)
    KnowledgeEmbedding.objects.update(dimensions=384, vector=bytes(384 * 4))
    with django_capture_on_commit_callbacks(execute=True):
        assert demo.reembed_outdated_demo_vectors(endpoint) == 1
    assert set(KnowledgeEmbedding.objects.values_list("dimensions", flat=True)) == {DIMENSIONS}
    assert demo.reembed_outdated_demo_vectors(endpoint) == 0


def test_demo_passwords_are_letters_and_digits_only():
    passwords = {demo.readable_password() for _ in range(500)}
    assert len(passwords) == 500 and all(p.isalnum() and len(p) == 12 for p in passwords)
