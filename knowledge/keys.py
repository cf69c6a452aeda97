"""The time a turn's regex keys may take (issue 23).

A lorebook entry's keys are SillyTavern's World Info keys, applied by the
World Info engine (worldinfo.engine); a key written `/pattern/flags` is a
regular expression the engine asks the caller to search
(knowledge.worldinfo.loading.TurnRegex), since a reader's pattern runs on
the server every turn. These limits bound that search: one pattern's
search, all of a turn's compiling and searching together (every recursion
pass shares it), and how many refused keys a turn's notes list.

Pure: no Django, no database.
"""

#: How long one regex key may search one scan text, in seconds. The scan
#: text is a few thousand characters; a pattern that needs longer is backtracking.
REGEX_TIMEOUT = 0.05
#: How long all of a turn's regex keys may be compiled and searched
#: together: a library of backtracking patterns costs its owner's turns a
#: quarter second, never the shared worker a second per pattern. Keys past it
#: are not tried; keys compiled before it stay compiled for the next turn.
REGEX_BUDGET = 0.25
#: Refused regex keys a turn's World Info notes list (the rest are skipped
#: quietly): enough for the inspector, never a line per key.
REFUSALS_REPORTED = 10
