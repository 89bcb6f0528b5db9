"""The claim table of a sharded ingest: workers that really die (SIGKILL) holding claims."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from dying_worker import die_holding

from hylo_analytics.ingest._claims import DIED, MAX_ATTEMPTS, Claims

BIG = 1 << 30


def _died(claims: Claims) -> list[str]:
    return [p for p, why in claims.failures() if why == DIED]


@pytest.mark.slow
def test_a_file_whose_workers_die_is_taken_alone_then_given_up(tmp_path: Path) -> None:
    claims = Claims(tmp_path, "job", lease=60)
    poison, b, c, d = (str(tmp_path / n) for n in ("a-poison", "b", "c", "d"))
    claims.register([(p, 10, 1) for p in (poison, b, c, d)])
    assert die_holding(tmp_path, "job") == [poison, b, c]  # a claim of three, and a death
    assert MAX_ATTEMPTS == 3
    assert die_holding(tmp_path, "job") == [poison]  # taken again: alone
    assert die_holding(tmp_path, "job") == [poison]
    me = claims.join()
    # three claims that never finished: given up; b was in a dead claim, so it goes alone too
    assert claims.claim(me, files=3, size=BIG) == [b]
    assert _died(claims) == [poison]
    claims.finish(me, [b], "done")
    assert claims.claim(me, files=3, size=BIG) == [c]
    claims.finish(me, [c], "done")
    assert claims.claim(me, files=3, size=BIG) == [d]
    claims.finish(me, [d], "done")
    assert claims.claim(me, files=3, size=BIG) == []
    assert claims.counts() == {"done": 3, "failed": 1}
    assert dict(claims.failures()) == {poison: DIED}
    # the command again: the same file is given up again without being read; a changed
    # one is tried afresh
    claims.register([(poison, 10, 1)])
    assert claims.claim(me, files=3, size=BIG) == [] and _died(claims) == [poison]
    claims.register([(poison, 12, 2)])
    assert claims.claim(me, files=3, size=BIG) == [poison] and _died(claims) == []
    claims.close()


def test_claims_given_back_or_finished_are_not_deaths(tmp_path: Path) -> None:
    claims = Claims(tmp_path, "job", lease=60)
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    claims.register([(a, 1, 1), (b, 1, 1)])
    w = claims.join()
    assert claims.claim(w, files=2, size=BIG) == [a, b]
    assert claims.release(w) == 2  # an ending worker gives them back: no death
    w = claims.join()
    assert claims.claim(w, files=2, size=BIG) == [a, b]  # together again, not alone
    claims.finish(w, [a, b], "done")
    claims.register([(a, 2, 2)])  # changed after it was stored: a fresh file
    assert claims.claim(w, files=2, size=BIG) == [a]
    claims.close()


def test_a_file_finished_late_by_a_worker_whose_lease_ran_out_is_done(tmp_path: Path) -> None:
    """A slow worker's lease expires, another takes the file; the slow one still publishes
    it and marks it done, whoever holds the claim now."""
    claims = Claims(tmp_path, "job", lease=0.05)
    x = str(tmp_path / "x")
    claims.register([(x, 1, 1)])
    slow, other = claims.join(), claims.join()
    assert claims.claim(slow, files=1, size=BIG) == [x]
    time.sleep(0.1)
    assert claims.claim(other, files=1, size=BIG) == [x]
    claims.finish(slow, [x], "done")
    claims.finish(other, [x], "failed", "not this one")  # a done file stays done
    assert claims.counts() == {"done": 1}
    claims.close()
