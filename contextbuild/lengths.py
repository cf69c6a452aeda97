"""The narration-length hint: a word range that keeps a reply inside its cap.

The endpoint cuts a reply off at `max_output_tokens`, mid-sentence, and the
state block comes last, so a cut reply loses the turn's state first. Asking
the model to finish inside the cap prevents the cut. The cap itself is never
lowered per length setting: that would make a brief turn likelier to be cut.
"""

#: Tokens kept back from the cap for the state block.
LENGTH_HEADROOM = 50
#: Models cannot count tokens but do follow a word budget; English prose
#: averages about 0.75 words per token.
WORDS_PER_TOKEN = 0.75
#: Models overshoot word budgets and the cap is hard, so aim 10 % below it.
LENGTH_BUFFER = 0.90
#: Below this the hint adds nothing worth its tokens.
MIN_LENGTH_HINT_WORDS = 40
#: A ceiling alone makes a terse model write two paragraphs; a floor turns the
#: hint into a range that reads the same to verbose and terse models. It is a
#: share of the ceiling so it can never approach it.
LENGTH_FLOOR_SHARE = 0.35
#: At a tight cap a short turn is the right turn, so no floor is stated.
MIN_LENGTH_FLOOR_WORDS = 60
#: The floor prevents collapse; it does not ask for an essay at a large cap.
MAX_LENGTH_FLOOR_WORDS = 300
#: The campaign's narration-length choice as (floor, ceiling) in words: wide
#: enough for a scene to breathe, distinct enough to be a real setting.
LENGTH_BANDS = {
    "brief": (70, 180),
    "medium": (150, 380),
    "long": (320, 700),
}
#: When the cap cuts a band's ceiling, the floor follows proportionally rather
#: than colliding with it.
BAND_FLOOR_SHARE = 0.5

_TAIL = " Finish the narration and append the state block well inside the limit."


def length_hint(max_output_tokens: int, narration_length: str = "") -> str:
    """The hint for this cap and length choice, or "" when the cap is too small.

    The band narrows the range within what the cap allows and never widens it:
    a hint asking for more than the endpoint will emit asks for a cut reply.

    The number is stated as a limit, never a target: measured, "keep this turn
    under about N words" read as a quota and lengthened turns, while "must not
    exceed N ... a typical turn is much shorter" held them steady. The floor
    says "should not stop short of", which is a bound, not a target either.
    """
    words = int((max_output_tokens - LENGTH_HEADROOM) * WORDS_PER_TOKEN * LENGTH_BUFFER)
    if words < MIN_LENGTH_HINT_WORDS:
        return ""
    band = LENGTH_BANDS.get((narration_length or "").strip().lower())
    if band is None:
        floor = min(int(words * LENGTH_FLOOR_SHARE), MAX_LENGTH_FLOOR_WORDS)
    else:
        band_floor, band_ceiling = band
        words = min(words, band_ceiling)
        floor = min(band_floor, int(words * BAND_FLOOR_SHARE))
    if floor < MIN_LENGTH_FLOOR_WORDS:
        return (
            f"[Hard limit: this turn must not exceed {words} words. Write only as "
            f"much as the moment needs — a typical turn is much shorter.{_TAIL}]"
        )
    return (
        f"[Hard limit: this turn must not exceed {words} words, and it should not "
        f"stop short of about {floor}. Prefer the lower end of that range unless "
        f"the scene genuinely needs more.{_TAIL}]"
    )
