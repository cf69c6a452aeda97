"""Calibrating an embedding model's semantic floor, and using only that floor."""

from io import StringIO

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from endpoints import calibration
from endpoints.embeddings import for_retrieval
from endpoints.models import EmbeddingCalibration
from knowledge.query import QueryInputs
from knowledge.retrieval import retrieve
from tests.factories import CampaignFactory, EndpointProfileFactory


def calibrate(endpoint, model="demo-embed", *extra):
    out = StringIO()
    call_command("calibrate_embeddings", "--model", model, "--endpoint", endpoint.name, *extra, stdout=out)
    return out.getvalue()


def test_the_command_measures_prints_and_records_a_floor_for_demo_embed(endpoint, model):
    printed = calibrate(endpoint)
    recorded = EmbeddingCalibration.objects.get(model="demo-embed")
    assert "related" in printed and "unrelated" in printed and "median" in printed and "floor" in printed
    assert recorded.unrelated["p95"] < recorded.floor < recorded.related["p10"]
    assert recorded.related["pairs"] == 40 and recorded.unrelated["pairs"] == 40 * 39
    assert f"{recorded.floor:.4f}" in printed
    assert {r["path"] for r in model.requests()} == {"/v1/embeddings"}


def test_recalibrating_replaces_the_floor_and_a_dry_run_records_nothing(endpoint):
    calibrate(endpoint, "demo-embed", "--dry-run")
    assert not EmbeddingCalibration.objects.exists()
    calibrate(endpoint)
    calibrate(endpoint)
    assert EmbeddingCalibration.objects.count() == 1


def test_the_method_is_documented_in_the_help():
    from endpoints.management.commands.calibrate_embeddings import Command

    text = " ".join(Command().create_parser("manage.py", "calibrate_embeddings").format_help().split())
    assert "midpoint between the unrelated 95th percentile and the related 10th percentile" in text
    assert "overlap" in text


def test_overlapping_distributions_record_nothing():
    rng = np.random.default_rng(3)
    same = rng.standard_normal((40, 16))
    measured = calibration.measure(same, rng.standard_normal((40, 16)))
    assert measured.floor is None and "overlap" in measured.refusal


def test_a_dead_endpoint_fails_the_command_cleanly(endpoint, model):
    model.script_embeddings({"status": 401})
    with pytest.raises(CommandError):
        calibrate(endpoint)
    assert not EmbeddingCalibration.objects.exists()


def test_a_server_without_pooling_fails_the_command_with_the_pooling_advice(endpoint, model):
    model.script_embeddings({"per_token": True, "dimensions": 8})
    with pytest.raises(CommandError) as failed:
        calibrate(endpoint)
    message = str(failed.value)
    assert "returned one vector per token, not one per text" in message and "differing sizes" not in message
    assert "--embeddings --pooling mean" in message and "--kv_overrides ARCH.pooling_type=int:1" in message
    assert not EmbeddingCalibration.objects.exists()


def test_a_malformed_reply_fails_the_command_cleanly(endpoint, model):
    model.script_embeddings({"payload": {"object": "list", "data": []}})
    with pytest.raises(CommandError, match="sent an unusable reply .*: it holds no vectors"):
        calibrate(endpoint)
    assert not EmbeddingCalibration.objects.exists()


def test_an_uncalibrated_model_is_lexical_only_and_never_borrows_a_floor(alice, endpoint, model, library):
    calibrate(endpoint)
    other = EndpointProfileFactory(base_url=model.base_url, embedding_model="other-embed")
    campaign = CampaignFactory(owner=alice, endpoint=other)
    library(campaign, "# Westhaven\n\n## The lighthouse\n\nThe lighthouse keeper of Westhaven trims the wick.\n")
    model.clear_requests()
    result = retrieve(
        campaign_id=campaign.pk,
        **for_retrieval(other),
        query=QueryInputs.build(state={}, recent=["The lighthouse keeper of Westhaven waves."]),
    )
    assert not result.semantic_calibrated and not result.semantic_used and result.semantic_floor == 0.0
    assert "other-embed" in result.semantic_note and "lexical only" in result.semantic_note
    assert [c.admitted_by for c in result.candidates] == ["lexical"]
    assert all(c.cosine is None for c in result.candidates)
    assert not model.requests()  # no query embedding was even asked for
