"""What a turn costs the database before the model hears of it.

Turn overhead is counted in statements here and timed by `manage.py bench`
(turn overhead). Every statement on the way costs the ORM a fraction of a
millisecond, and each one added to the turn path is paid on every turn of
every reader: these ceilings make an added statement a decision, not an
accident.
"""

import time

from django.db import connection
from django.utils import timezone

from storyapp import services


#: The turn's transaction: the locked campaign, its head, the reader's
#: narrations in flight, the two actions (stamped visited), the head moved.
SUBMIT_STATEMENTS = 6
#: The narration until its request reaches the model, in a story with derived
#: work (a memory of the first narration) and an empty library: the claim and
#: the action, the window, the cast, the last prompt's anchor, derived work's
#: existence and the lineage, the library's stamp, the embedding model's floor
#: (twice: lore and memories) and the calibrated models, summaries, memories
#: (words, then vectors), whispers, derived notices, and the one-slot
#: server's lease (taken, beaten, stale ones cleared, the holders read, held).
NARRATION_STATEMENTS = 22


def _recorded(statements):
    """Records each statement with its time; savepoints are left out (the
    test's own transaction makes every atomic block one)."""

    def record(execute, sql, params, many, context):
        if not sql.startswith(("SAVEPOINT", "RELEASE SAVEPOINT")):
            statements.append((time.perf_counter(), sql))
        return execute(sql, params, many, context)

    return record


def test_a_turn_reaches_the_model_within_its_statement_budget(campaign, play, model, django_capture_on_commit_callbacks):
    play("I walk to the quay.")  # a story with a narration, and the memory derived from it
    submitted, narrated = [], []
    with django_capture_on_commit_callbacks(execute=False) as queued:
        with connection.execute_wrapper(_recorded(submitted)):
            services.turn_submit(campaign=campaign, text="I look around.", now=timezone.now())
    model.clear_requests()
    with connection.execute_wrapper(_recorded(narrated)):
        for callback in queued:
            callback()
    [chat] = [r for r in model.requests() if r["path"].endswith("/chat/completions")]
    before_model = [sql for at, sql in narrated if at < chat["received"]]
    assert len(submitted) <= SUBMIT_STATEMENTS, "\n".join(sql for _, sql in submitted)
    assert len(before_model) <= NARRATION_STATEMENTS, "\n".join(before_model)
