"""The one error family: every error a user can meet is a :class:`HyloError`.

(``IngestError``, an :class:`InputError` carrying the ingest ``Problem``, lives beside it in
``hylo_analytics.ingest._report``.)

Catch ``HyloError`` for "the toolkit refused or could not do what I asked"; each subclass
keeps the built-in base users caught before it existed (``ValueError``,
``FileNotFoundError``, ``RuntimeError``, ``LookupError``), so old ``except`` clauses still
work. Messages say what was wrong and what to do; the CLI prints them without a traceback.
"""

from __future__ import annotations

__all__ = [
    "ArchiveError",
    "BadRequestError",
    "ComparabilityError",
    "ConfigError",
    "GraderError",
    "HyloError",
    "InputError",
    "InputNotFoundError",
    "InputTypeError",
    "ManifestError",
    "ManifestWriteError",
    "RunSelectionError",
    "SelectionError",
    "SingleRunError",
    "StaleSnapshotError",
    "StoreError",
    "StoreLockedError",
    "StoreNotFoundError",
    "StoreWriteError",
    "UnknownRunError",
]


class HyloError(Exception):
    """The base of every error hylo_analytics raises on purpose."""


# -- input refused ---------------------------------------------------------------------------


class InputError(HyloError, ValueError):
    """An argument, file or field the toolkit refuses; the message names it and the fix."""


class InputTypeError(InputError, TypeError):
    """An argument of the wrong type (still a ``TypeError`` for callers that catch that)."""


class InputNotFoundError(InputError, FileNotFoundError):
    """A file or folder the user named is not there (still a ``FileNotFoundError``)."""


class ConfigError(HyloError, ValueError):
    """A configuration value is wrong; ``path`` is its key path (``policies[2].must_between.min``)."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}" if path else message)


class ArchiveError(InputError):
    """An ``.eval`` zip we refuse to read: the message says which member and why."""


class BadRequestError(InputError):
    """A query parameter the web app cannot use; the 400 page shows the message."""


# -- selection -------------------------------------------------------------------------------


class SelectionError(HyloError, ValueError):
    """A selection (runs, tasks, metrics, groups) that names nothing, or not one thing."""


class RunSelectionError(SelectionError):
    """A run id or selector names no run, or several."""


class UnknownRunError(HyloError, LookupError):
    """A run id in a URL that the store does not hold (a 404, so not a ``ValueError``)."""


# -- comparability ---------------------------------------------------------------------------


class ComparabilityError(HyloError, ValueError):
    """Runs that measure different things were asked to be compared (see ``force``)."""


class SingleRunError(ComparabilityError):
    """The probability of improvement was asked of one run per task (see ``ONE_RUN_NOTE``)."""


# -- store -----------------------------------------------------------------------------------


class StoreError(HyloError):
    """A store operation failed for a reason the user can act on; the message says which.

    The CLI prints it without a traceback. Nothing stored is lost or half-written.
    """


class StoreNotFoundError(StoreError, FileNotFoundError):
    """A command that reads a store was pointed at a folder that holds none."""


class StoreLockedError(StoreError):
    """Another process held the writer lock for longer than the lock timeout."""


class StoreWriteError(StoreError):
    """Writing to the store failed (a full disk, an I/O error, no permission); nothing was
    published, so the store reads as it did before."""


class ManifestError(StoreError, RuntimeError):
    """The manifest cannot be read, or names a batch folder that is not there.

    Nothing rewrites it: the store is left exactly as found, for a person to restore.
    """


class ManifestWriteError(StoreError):
    """Publishing a manifest failed (a full disk, an I/O error): the old one is still the store."""


class StaleSnapshotError(StoreError, RuntimeError):
    """A pinned snapshot's files were collected by a later writer: re-run the operation."""


# -- running user code -----------------------------------------------------------------------


class GraderError(HyloError, RuntimeError):
    """A grader failed or returned something that is not a grade; nothing was stored."""
