"""Loremaster's pure prompt builder: frozen records in, prompt text and report out.

Nothing in this package imports Django, the apps, Celery or a model client, and
nothing reads the clock or the network; `storyapp` gathers a turn's inputs and
hands them over as the records below.
"""

from .builder import BuiltContext, ContextOverflow, build_context, effective_budget
from .inject import Plan, plan, render, report, select
from .lengths import length_hint
from .records import (
    Campaign,
    HistoryAction,
    KnowledgeCandidate,
    KnowledgeResult,
    Memory,
    ModelSettings,
    Persona,
    Section,
    Summary,
    TurnInputs,
    Window,
)
from .rules import (
    DEFAULT_NARRATOR_PROMPT,
    EMIT_REMINDER,
    STATE_RULE,
    render_canon,
    render_persona,
    render_refusals,
    render_state,
)
from .tokens import count_tokens, truncate_to_last_tokens

__all__ = [
    "DEFAULT_NARRATOR_PROMPT",
    "EMIT_REMINDER",
    "STATE_RULE",
    "BuiltContext",
    "Campaign",
    "ContextOverflow",
    "HistoryAction",
    "KnowledgeCandidate",
    "KnowledgeResult",
    "Memory",
    "ModelSettings",
    "Persona",
    "Plan",
    "Section",
    "Summary",
    "TurnInputs",
    "Window",
    "build_context",
    "count_tokens",
    "effective_budget",
    "length_hint",
    "plan",
    "render",
    "render_canon",
    "render_persona",
    "render_refusals",
    "render_state",
    "report",
    "select",
    "truncate_to_last_tokens",
]
