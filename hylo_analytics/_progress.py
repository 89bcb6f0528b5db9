"""Progress bars for long work: on a terminal and in Jupyter, never into a pipe or a log.

A ranking of 2,000 policies or a bootstrap of every cell takes seconds to a minute; a user
watching a terminal or a notebook should see it move, a script piping the output should get
no ``\\r`` noise. :func:`progress` decides once (``enabled=None``: stderr is a terminal, or
the process is a Jupyter kernel) and shows the bar only after ``delay`` seconds, so quick
calls print nothing. The text bar (``tqdm.std``) also renders in Jupyter without ipywidgets.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

__all__ = ["Progress", "interactive", "progress"]


class Progress(Protocol):
    """What a stage calls on its bar."""

    def update(self, n: float = 1) -> bool | None: ...

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None: ...


def interactive() -> bool:
    """Whether a person is watching: stderr is a terminal, or this is a Jupyter kernel."""
    if "ipykernel" in sys.modules:
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # closed or replaced streams
        return False


@contextmanager
def progress(
    total: int, desc: str, *, unit: str = "step", enabled: bool | None = None, delay: float = 2.0
) -> Iterator[Progress]:
    """A bar of ``total`` steps named ``desc``, shown after ``delay`` s when ``enabled`` (None:
    :func:`interactive`)."""
    from tqdm.std import tqdm

    show = interactive() if enabled is None else enabled
    bar = tqdm(total=total, desc=desc, unit=unit, disable=not show, delay=delay, leave=False)
    try:
        yield bar
    finally:
        bar.close()
