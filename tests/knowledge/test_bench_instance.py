"""`manage.py bench_instance` end to end at a toy size: it builds its
instance in a database of its own, measures it in fresh processes, and
prints every figure (their values are the benchmark's business)."""

from io import StringIO

from django.core.management import call_command
from django.db import connection


def test_the_instance_benchmark_builds_measures_and_records_its_instance(transactional_db, tmp_path):
    out = StringIO()
    options = dict(campaigns=2, passages=300, turns=3, workers=2, megabytes=0.05, dir=str(tmp_path))
    call_command("bench_instance", stdout=out, **options)
    printed = out.getvalue()
    assert "2 campaigns x 300 passages (600), built in" in printed
    assert "database on disk" in printed
    assert "first turn in a fresh process: retrieval" in printed
    assert "next 3 turns: retrieval p50" in printed and "process RSS" in printed
    if connection.vendor == "postgresql":
        assert "2 importers at once" in printed

    assert list(tmp_path.glob("instance-*.json")), "the built instance is recorded for --keep"
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f'DROP DATABASE "{connection.settings_dict["NAME"]}_instance" WITH (FORCE)')
