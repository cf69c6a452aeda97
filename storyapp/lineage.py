"""Reading the story: the path from the root of the action tree to a head.

Every read of the lineage goes through this module. The actions form a tree,
and what a prompt, a retrieval query or a summary may see is one path of it;
a query that read "the campaign's newest actions" instead would leak turns the
reader undid and branched away from.

The path is walked upwards from the head with a recursive CTE that follows
`parent_id` one primary-key lookup at a time and stops after `limit` steps, so
reading a window costs time in proportion to the window, never to the length
of the story (a 10,000-action story reads 40 rows for a 40-action window).
Both SQLite and PostgreSQL run the same SQL.
"""

from __future__ import annotations

from django.db import connection

from .models import Action

_WALK_SQL = """
WITH RECURSIVE chain(id, steps) AS (
    SELECT id, 0 FROM {table} WHERE id = %s AND campaign_id = %s
    UNION ALL
    SELECT a.parent_id, chain.steps + 1
    FROM {table} a JOIN chain ON a.id = chain.id
    WHERE a.parent_id IS NOT NULL AND chain.steps + 1 < %s
)
SELECT a.* FROM {table} a JOIN chain ON a.id = chain.id ORDER BY a.depth
"""


def window(campaign_id: int, head_id: int | None, limit: int) -> list[Action]:
    """The last `limit` actions of the lineage ending at `head_id`, oldest first."""
    if head_id is None or limit <= 0:
        return []
    sql = _WALK_SQL.format(table=Action._meta.db_table)
    return list(Action.objects.raw(sql, [head_id, campaign_id, limit]))


_COVERING_SQL = """
WITH RECURSIVE chain(id, covered) AS (
    SELECT id, token_count FROM {table} WHERE id = %s AND campaign_id = %s
    UNION ALL
    SELECT p.id, chain.covered + p.token_count
    FROM {table} a JOIN chain ON a.id = chain.id JOIN {table} p ON p.id = a.parent_id
    WHERE chain.covered < %s
)
SELECT {columns} FROM {table} a JOIN chain ON a.id = chain.id ORDER BY a.depth
"""

#: What a prompt reads of its history's actions (storyapp.prompting,
#: modelprose, World Info's scan): the rest is left deferred. Their state,
#: timers and times are a few JSON documents and dates to decode per row,
#: most of the work of reading a long window, and the turn reads the
#: state and timers from its position alone.
PROMPT_COLUMNS = (
    "id", "campaign_id", "parent_id", "depth", "kind", "text", "token_count", "status", "seat_name", "author_id",
    "state_rejections",
)


def window_covering(campaign_id: int, head_id: int | None, tokens: int) -> list[Action]:
    """The newest lineage actions whose stored token counts add up to at least
    `tokens` (or the whole lineage, if shorter), oldest first.

    The prompt builder can use no more history than its budget, so a window
    that already holds a budget's worth of tokens is provably enough. One
    statement: the walk adds each step's tokens and stops once they cover
    the budget, so no action past it is read. Only PROMPT_COLUMNS are
    read; another field of these actions costs a query of its own.
    """
    if head_id is None or tokens <= 0:
        return []
    sql = _COVERING_SQL.format(table=Action._meta.db_table, columns=", ".join(f"a.{c}" for c in PROMPT_COLUMNS))
    return list(Action.objects.raw(sql, [head_id, campaign_id, tokens]))


def tail(campaign_id: int, head_id: int | None, count: int, *, within: list[Action] | None = None) -> list[Action]:
    """The newest `count` lineage actions, oldest first; taken from `within`
    (a window read already, ending at `head_id`) when it holds them all."""
    if within is not None and (len(within) >= count or (within and within[0].parent_id is None)):
        return within[-count:]
    return window(campaign_id, head_id, count)


def contains(campaign_id: int, head_id: int | None, action: Action) -> bool:
    """Whether `action` lies on the lineage ending at `head_id`."""
    if head_id is None:
        return False
    head_depth = (
        Action.objects.filter(pk=head_id, campaign_id=campaign_id).values_list("depth", flat=True).first()
    )
    if head_depth is None or action.depth > head_depth:
        return False
    steps = head_depth - action.depth + 1
    chain = window(campaign_id, head_id, steps)
    return bool(chain) and chain[0].pk == action.pk


_IDS_SQL = """
WITH RECURSIVE chain(id, parent_id) AS (
    SELECT id, parent_id FROM {table} WHERE id = %s AND campaign_id = %s
    UNION ALL
    SELECT a.id, a.parent_id FROM {table} a JOIN chain ON a.id = chain.parent_id
)
SELECT id FROM chain
"""

_SUBTREE_SQL = """
WITH RECURSIVE below(id) AS (
    SELECT id FROM {table} WHERE id = %s AND campaign_id = %s
    UNION ALL
    SELECT a.id FROM {table} a JOIN below ON a.parent_id = below.id
)
SELECT id FROM below
"""


def ids(campaign_id: int, head_id: int | None) -> frozenset[int]:
    """Every action id of the lineage ending at `head_id`: what derived work
    (summaries, memories) is checked against, so none from an undone branch
    is used. Ids only, one primary-key step per action."""
    if head_id is None:
        return frozenset()
    with connection.cursor() as cursor:
        cursor.execute(_IDS_SQL.format(table=Action._meta.db_table), [head_id, campaign_id])
        return frozenset(row[0] for row in cursor.fetchall())


def subtree_ids(campaign_id: int, action_id: int) -> list[int]:
    """The action and every action below it, on every branch: what an edit
    of it invalidates."""
    with connection.cursor() as cursor:
        cursor.execute(_SUBTREE_SQL.format(table=Action._meta.db_table), [action_id, campaign_id])
        return [row[0] for row in cursor.fetchall()]
