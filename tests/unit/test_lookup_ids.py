"""Payment intent lookup ids: unguessable, and in creation order as text (see new_lookup_id)."""

import re
import secrets
from datetime import UTC, datetime, timedelta

from treasury_core.services.payments import is_lookup_id, new_lookup_id

CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"
NOW = datetime(2026, 11, 25, 18, 0, 0, 123456, tzinfo=UTC)


def millis_of(lookup_id: str) -> int:
    stamp = lookup_id.removeprefix("pil_")[:9]
    return sum(CROCKFORD.index(c) << 5 * (8 - i) for i, c in enumerate(stamp))


def test_shape_time_and_randomness() -> None:
    made = [new_lookup_id(NOW, secrets.token_urlsafe(24)) for _ in range(500)]
    for lookup_id in made:
        # 9 digits of time, then 24 random bytes as 32 URL-safe characters (192 bits).
        assert re.fullmatch(r"pil_[0-9a-hjkmnp-tv-z]{9}[A-Za-z0-9_-]{32}", lookup_id)
        assert is_lookup_id(lookup_id)
        assert millis_of(lookup_id) == (NOW - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(
            milliseconds=1
        )
    assert len({m[13:] for m in made}) == len(made)  # the random parts differ


def test_later_ids_sort_after_earlier_ones_as_text() -> None:
    times = [NOW + timedelta(milliseconds=n) for n in (0, 1, 2, 999, 60_000, 86_400_000 * 3650)]
    made = [new_lookup_id(t, secrets.token_urlsafe(24)) for t in times]
    assert made == sorted(made)
    assert [millis_of(m) - millis_of(made[0]) for m in made] == [
        (t - NOW) // timedelta(milliseconds=1) for t in times
    ]
