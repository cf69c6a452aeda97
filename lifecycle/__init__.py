"""The one work lifecycle every kind of background work follows (narrations,
summary and memory jobs, index jobs): claim, beat, stale, re-send, retry
with backoff, the operator's requeue and fail.

It sits below the apps (storyapp and knowledge use it; ops runs the sweep
it defines) and imports none of them, so each app declares its own field
names and states to it instead.

- `policy`: the figures and the rules, pure (no Django).
- `queryset`: the same rules as queries, a QuerySet each model's manager is built from.
- `beat`: the thread that keeps running work's row fresh.
- `signals`: the periodic sweep each app answers with its own repairs.
- `sending`: sending a task by its name, so what queues work need not import what runs it.
- `workers`: which workers are alive, answered by ops for the pages below it.
"""
