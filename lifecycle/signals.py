"""The one periodic signal the workers' sweep sends (ops.sweeper), the way
pretix's `periodic_task` is: each app connects its own repairs (narrations
sent again, derived jobs re-sent, index jobs recovered) in its AppConfig,
so the sweeper knows none of them and none of them knows the sweeper.

Receivers take `now` (the sweep's time) and must be quick and safe to run
twice: one worker sweeps each period, but a lost cache lock lets two.
"""

from django.dispatch import Signal

periodic_sweep = Signal()
