import re

import pytest

from contextbuild import length_hint
from contextbuild.lengths import LENGTH_BANDS


def numbers(hint: str) -> tuple[int, int | None]:
    ceiling = int(re.search(r"must not exceed (\d+) words", hint).group(1))
    floor = re.search(r"stop short of about (\d+)", hint)
    return ceiling, int(floor.group(1)) if floor else None


@pytest.mark.parametrize(
    ("cap", "length", "ceiling", "floor"),
    [
        (600, "", 371, 129),
        (600, "brief", 180, 70),
        (600, "medium", 371, 150),
        (600, "long", 371, 185),
        (2400, "", 1586, 300),
        (2400, "long", 700, 320),
        (2400, "Brief ", 180, 70),
        (150, "", 67, None),
        (150, "long", 67, None),
        (600, "epic", 371, 129),
    ],
)
def test_hint_states_the_ceiling_and_floor_for_cap_and_band(cap, length, ceiling, floor):
    assert numbers(length_hint(cap, length)) == (ceiling, floor)


@pytest.mark.parametrize("cap", [0, 50, 100, 108])
def test_no_hint_when_the_cap_is_too_small_to_state_usefully(cap):
    assert length_hint(cap) == ""


@pytest.mark.parametrize("length", ["", *LENGTH_BANDS])
@pytest.mark.parametrize("cap", [120, 200, 300, 600, 1000, 4000])
def test_hint_never_asks_for_more_than_the_cap_allows(cap, length):
    hint = length_hint(cap, length)
    if not hint:
        return
    ceiling, floor = numbers(hint)
    assert ceiling <= (cap - 50) * 0.75 * 0.9
    assert floor is None or floor < ceiling


def test_hint_reads_as_a_limit_and_asks_for_the_state_block():
    hint = length_hint(600)
    assert "Hard limit" in hint
    assert "state block" in hint
    assert "under about" not in hint
