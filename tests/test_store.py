"""The store: atomic commits, tombstones, reading through DuckDB and polars."""

from __future__ import annotations

import contextlib
import errno
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import hylo_analytics as ha
from hylo_analytics import _manifest, _schema
from hylo_analytics.cli import main
from hylo_analytics.store import ManifestError, StoreError, StoreWriteError, Tombstone

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"


def _samples(run_id: str, keys: list[str]) -> pa.Table:
    return pa.table(
        {
            "run_id": [run_id] * len(keys),
            "key": keys,
            "task_id": [k.split("#")[0] for k in keys],
            "seed": [int(k.split("#")[1]) for k in keys],
        }
    )


def test_new_store_has_empty_typed_views(tmp_path: Path) -> None:
    store = ha.open_store(tmp_path / "s")
    for name in _schema.TABLES:
        frame = store.sql(f"SELECT * FROM raw_{name}")
        assert frame.height == 0
        assert frame.columns == _schema.SCHEMAS[name].names


def test_commit_is_one_folder_and_later_commits_supersede(tmp_path: Path) -> None:
    store = ha.open_store(tmp_path / "s")
    with store.parquet.lock():
        s1 = store.parquet.commit({"samples": _samples("r1", ["a#1", "a#2"])})
        s2 = store.parquet.commit(
            {"samples": _samples("r1", ["a#3"])}, [Tombstone("samples", "r1")]
        )
        store.parquet.commit({"samples": _samples("r2", ["a#1"])})
    assert s2 > s1
    assert sorted((store.root / "batches").iterdir())[-1].name.isdigit()
    got = store.sql("SELECT run_id, key FROM stg_samples ORDER BY run_id, key")
    assert got.rows() == [("r1", "a#3"), ("r2", "a#1")]
    assert store.sql("SELECT count(*) FROM raw_samples").item() == 4  # history is kept


def test_score_tombstones_are_per_source(tmp_path: Path) -> None:
    store = ha.open_store(tmp_path / "s")

    def scores(source: str, value: float) -> pa.Table:
        return pa.table(
            {"run_id": ["r"], "key": ["a#1"], "metric": ["m"], "value": [value], "source": [source]}
        )

    with store.parquet.lock():
        store.parquet.commit(
            {"scores": pa.concat_tables([scores("evallog", 1.0), scores("scorer:m", 2.0)])}
        )
        store.parquet.commit(
            {"scores": scores("scorer:m", 3.0)}, [Tombstone("scores", "r", "scorer:m")]
        )
    got = store.sql("SELECT source, value FROM stg_scores ORDER BY source").rows()
    assert got == [("evallog", 1.0), ("scorer:m", 3.0)]


def test_conform_rejects_unknown_columns() -> None:
    with pytest.raises(ValueError, match="not in its schema"):
        _schema.conform(pa.table({"run_id": ["x"], "bogus": [1]}), "runs")


def test_failed_commit_leaves_nothing(tmp_path: Path) -> None:
    store = ha.open_store(tmp_path / "s")
    bad = pa.table({"run_id": ["r"], "seed": ["not a number"]})
    with store.parquet.lock(), pytest.raises(pa.ArrowInvalid):
        store.parquet.commit({"samples": bad})
    assert store.sql("SELECT count(*) FROM raw_samples").item() == 0
    assert not any((store.root / "_staging").glob("*"))
    assert len(list((store.root / "batches").iterdir())) == 1


def test_table_is_lazy_polars(sample_store: ha.Store) -> None:
    lf = sample_store.table("samples")
    assert isinstance(lf, pl.LazyFrame)
    got = lf.filter(pl.col("status") == "error").select(pl.len()).collect().item()
    assert got == sample_store.sql("SELECT count(*) FROM stg_samples WHERE status = 'error'").item()
    assert sample_store.table("mart_runs").collect().height == 3


def test_sql_takes_parameters(sample_store: ha.Store) -> None:
    got = sample_store.sql("SELECT count(*) AS n FROM stg_samples WHERE seed = ?", [1000])
    assert got["n"][0] == 30


def test_batches_keep_runs_together_in_row_groups_readers_can_skip(tmp_path: Path) -> None:
    """Runs arrive in any order; the file holds them sorted, each row group a narrow run range."""
    import pyarrow.parquet as pq

    from hylo_analytics.store import ROW_GROUP_ROWS

    runs = [f"run-{i:03d}" for i in range(40)]
    order = [runs[(i * 17) % 40] for i in range(40)]  # a shuffled arrival order
    per_run = ROW_GROUP_ROWS // 8
    table = pa.concat_tables(
        _samples(r, [f"t#{j}" for j in range(per_run)]).append_column(
            "epoch", pa.array([j % 3 for j in range(per_run)], pa.int64())
        )
        for r in order
    )
    store = ha.open_store(tmp_path / "s")
    with store.parquet.lock():
        seq = store.parquet.commit({"samples": table})
    meta = pq.ParquetFile(store.root / "batches" / f"{seq:020d}" / "samples.parquet").metadata
    assert meta.num_row_groups == 5
    ranges = []
    for g in range(meta.num_row_groups):
        stats = meta.row_group(g).column(0).statistics
        ranges.append((stats.min, stats.max))
    assert ranges == sorted(ranges)
    assert all(hi < lo for (_, hi), (lo, _) in itertools.pairwise(ranges))
    # a run's rows keep their order, and nothing is lost or duplicated
    got = store.sql("SELECT key, epoch FROM stg_samples WHERE run_id = 'run-007'")
    assert got["key"].to_list() == [f"t#{j}" for j in range(per_run)]
    assert store.sql("SELECT count(*) FROM stg_samples").item() == table.num_rows


@pytest.mark.slow
@pytest.mark.parametrize(("odd", "plain"), [("a[1]", "a1"), ("b?", "bx"), ("c*", "cc")])
def test_paths_are_never_glob_patterns(tmp_path: Path, odd: str, plain: str) -> None:
    """A store (and an input folder) whose name DuckDB would glob reads its own files only.

    The sibling's name is one the pattern matches, so a path read as a glob shows its rows.
    """
    runs = sorted(p for p in SAMPLE.iterdir() if p.is_dir())
    inputs = {"in[1]": runs[:1], "in1": runs[1:]}
    for folder, chosen in inputs.items():
        for run in chosen:
            shutil.copytree(run, tmp_path / folder / run.name)
    sibling = ha.open_store(tmp_path / plain)
    sibling.ingest(tmp_path / "in1", progress=False)
    store = ha.open_store(tmp_path / odd)
    store.ingest(tmp_path / "in[1]", progress=False)
    own = {r.name for r in runs[:1]}

    def seen(s: ha.Store) -> tuple[set[str], int]:
        ids = set(s.sql("SELECT run_id FROM runs")["run_id"].to_list())
        return ids, int(s.sql("SELECT count(*) AS n FROM samples")["n"].item())

    ids, n_samples = seen(store)
    assert ids == own and n_samples > 0
    assert seen(sibling)[0] == {r.name for r in runs[1:]}
    store.score()
    n_scores = int(store.sql("SELECT count(*) AS n FROM scores")["n"].item())
    assert n_scores > 0
    assert set(store.sql("SELECT DISTINCT run_id FROM scores")["run_id"].to_list()) == own
    with store.parquet.lock():
        report = store.parquet.compact()
    assert report.batches_after < report.batches_before
    reopened = ha.open_store(tmp_path / odd, create=False)
    assert seen(reopened) == (ids, n_samples)
    assert int(reopened.sql("SELECT count(*) AS n FROM scores")["n"].item()) == n_scores
    assert seen(sibling)[0] == {r.name for r in runs[1:]}


def _files(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under ``root`` with its mtime and size: what a write would change."""
    out = {".": (root.stat().st_mtime_ns, 0)}
    for p in sorted(root.rglob("*")):
        st = p.stat()
        out[str(p.relative_to(root))] = (st.st_mtime_ns, 0 if p.is_dir() else st.st_size)
    return out


def _every_view(store: ha.Store) -> dict[str, int]:
    names = store.sql("SELECT view_name FROM duckdb_views() WHERE NOT internal")["view_name"]
    return {n: store.sql(f'SELECT count(*) AS n FROM "{n}"')["n"].item() for n in names}


@pytest.mark.slow
def test_opening_and_querying_a_store_writes_nothing(tmp_path: Path) -> None:
    store = ha.open_store(tmp_path / "s")
    store.ingest(SAMPLE, progress=False)
    store.score()
    answers = _every_view(store)
    before = _files(store.root)
    for create in (False, True):
        reader = ha.open_store(store.root, create=create)
        assert _every_view(reader) == answers
        assert reader.runs().height == 3
        assert reader.table("samples").collect().height == answers["samples"]
    assert _files(store.root) == before


@pytest.mark.slow
def test_a_store_with_an_old_empty_batch_is_read_in_memory_and_fixed_by_the_next_writer(
    tmp_path: Path,
) -> None:
    """Batch 0's empty files of older schemas (or none) are rewritten by a writer, not an open."""
    store = ha.open_store(tmp_path / "s")
    store.ingest(SAMPLE, progress=False)
    answers = _every_view(store)
    empty = store.root / "batches" / f"{0:020d}"
    old = _schema.empty("samples")
    pq.write_table(old.drop_columns(old.column_names[-1]), empty / "samples.parquet")
    (empty / "events.parquet").unlink()
    before = _files(store.root)
    reader = ha.open_store(store.root, create=False)
    assert _every_view(reader) == answers
    assert (
        reader.sql("SELECT * FROM raw_samples LIMIT 0").columns == _schema.SCHEMAS["samples"].names
    )
    assert _files(store.root) == before
    with reader.parquet.lock():
        pass
    assert pq.read_schema(empty / "samples.parquet").names == _schema.SCHEMAS["samples"].names
    assert (empty / "events.parquet").exists()
    assert _every_view(ha.open_store(store.root, create=False)) == answers


@pytest.mark.slow
def test_opening_a_missing_folder_creates_nothing_until_the_first_write(tmp_path: Path) -> None:
    """``open_store("typo")`` reads as an empty store and leaves nothing on disk; the first
    write (an ingest) makes the store, and it then reads as any other."""
    typo = tmp_path / "typo"
    store = ha.open_store(typo)
    assert not store.exists
    assert store.runs().height == 0
    assert store.sql("SELECT count(*) AS n FROM scores")["n"].item() == 0
    assert store.aggregate().height == 0
    assert store.table("samples").collect().height == 0
    assert store.data_version() == 0
    views = _every_view(store)
    assert views.pop("metric_specs") > 0  # the registry's, not the store's
    assert set(views.values()) == {0}
    assert not typo.exists()
    with pytest.raises(ha.StoreNotFoundError, match=r"no store at .*typo"):
        ha.open_store(typo, create=False)
    assert not typo.exists()
    other = ha.open_store(typo)  # a second reader opened before the store exists
    store.ingest(SAMPLE, progress=False)
    assert store.exists and (typo / "manifest.json").exists()
    assert store.runs().height == 3
    assert other.runs().height == 3  # the new store is noticed by a reader opened before it
    assert ha.open_store(typo, create=False).runs().height == 3


def test_the_first_commit_makes_a_missing_store(tmp_path: Path) -> None:
    store = ha.open_store(tmp_path / "deep" / "s")
    with store.parquet.lock():
        store.parquet.commit({"samples": _samples("r1", ["a#1"])})
    assert (store.root / "manifest.json").exists()
    assert (store.root / "batches" / f"{0:020d}" / "samples.parquet").exists()
    reopened = ha.open_store(store.root, create=False)
    assert reopened.sql("SELECT run_id, key FROM stg_samples").rows() == [("r1", "a#1")]


def _run_as_other_user(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """``argv`` as a user without write permission: nobody (65534) when the tests run as root,
    which ignores permissions, else the current user (the copy is chmod a-w).

    nobody keeps one capability, CAP_DAC_READ_SEARCH (read any file, search any folder; it
    grants no write), so it can run the interpreter, the venv and the package wherever the
    clone lives (a checkout under a private folder such as /root), while every write is still
    checked against its permissions."""
    prefix = []
    if os.getuid() == 0:
        prefix = [
            "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
            "--inh-caps=-all,+dac_read_search", "--ambient-caps=+dac_read_search",
        ]  # fmt: skip
    code = "import sys; from hylo_analytics.cli import main; sys.exit(main())"
    env = {**os.environ, "PYTHONPATH": str(SAMPLE.parents[1]), "HOME": "/tmp"}
    return subprocess.run(
        [*prefix, sys.executable, "-c", code, *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd="/",
        timeout=120,
    )


@pytest.mark.slow
def test_a_read_only_store_can_be_queried_by_a_user_who_cannot_write(
    sample_store: ha.Store,
) -> None:
    """A real permission check: a chmod a-w copy queried by a non-root process."""
    top = Path(tempfile.mkdtemp(prefix="hylo-ro-"))
    try:
        os.chmod(top, 0o755)
        ro = top / "store"
        shutil.copytree(sample_store.root, ro)
        for p in [ro, *ro.rglob("*")]:
            os.chmod(p, 0o555 if p.is_dir() else 0o444)
        before = _files(ro)
        out = _run_as_other_user(
            ["sql", "--store", str(ro), "--format", "csv", "SELECT count(*) AS n FROM samples"]
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == ["n", str(sample_store.sql("FROM samples").height)]
        denied = _run_as_other_user(["ingest", str(SAMPLE), "--store", str(ro)])
        assert denied.returncode == 2
        assert "Traceback" not in denied.stderr
        assert f"permission denied while locking the store at {ro}/.lock; " in denied.stderr
        assert "the store can still be queried" in denied.stderr
        assert _files(ro) == before
    finally:
        for p in [top, *top.rglob("*")]:
            os.chmod(p, 0o755)
        shutil.rmtree(top)


@contextlib.contextmanager
def _small_disk(folder: Path) -> Iterator[bool]:
    """An 8 MB tmpfs at ``folder`` when this process may mount one (True), else a plain folder."""
    folder.mkdir()
    mounted = (
        os.getuid() == 0
        and shutil.which("mount") is not None
        and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(folder)], capture_output=True
        ).returncode
        == 0
    )
    try:
        yield mounted
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(folder)], check=True)


def _fill(folder: Path) -> None:
    """Write ``folder/filler`` until the disk is full."""
    try:
        with open(folder / "filler", "wb") as fh:
            while True:
                fh.write(b"x" * 65536)
                fh.flush()
    except OSError as exc:
        assert exc.errno == errno.ENOSPC


@pytest.mark.slow
def test_a_full_disk_fails_the_commit_clearly_and_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """ENOSPC at the Parquet write: a real full tmpfs where it can be mounted, else injected."""
    runs = sorted(p for p in SAMPLE.iterdir() if p.is_dir())
    with _small_disk(tmp_path / "disk") as real:
        root = tmp_path / "disk" / "store"
        store = ha.open_store(root)
        store.ingest(runs[0], progress=False)
        answers = _every_view(store)
        batches = sorted(p.name for p in (root / "batches").iterdir())
        if real:
            _fill(tmp_path / "disk")
        else:

            def full(*args: object, **kwargs: object) -> None:
                raise OSError(errno.ENOSPC, "Error writing bytes to file")

            monkeypatch.setattr(pq, "write_table", full)
        code = main(["ingest", str(runs[1]), "--store", str(root), "--quiet"])
        err = capsys.readouterr().err
        assert code == 2
        assert "Traceback" not in err
        assert re.search(
            r"ingest: error: no space left on device while writing batch \d+ to "
            + re.escape(str(root / "_staging"))
            + r"/\S+; nothing was published, the store is unchanged",
            err,
        ), err
        with pytest.raises(StoreWriteError, match="no space left on device while writing"):
            store.ingest(runs[1], progress=False)
        assert not any((root / "_staging").iterdir())
        assert sorted(p.name for p in (root / "batches").iterdir()) == batches
        assert _every_view(store) == answers
        assert _every_view(ha.open_store(root, create=False)) == answers
        monkeypatch.undo()
        if real:
            (tmp_path / "disk" / "filler").unlink(missing_ok=True)
        store.ingest(runs[1], progress=False)  # space again: the same ingest goes through
        assert store.runs().height == 2


@pytest.mark.slow
@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO, errno.EACCES])
def test_write_errors_at_every_step_leave_the_store_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    """The batch write, the manifest's publication and a compaction's merge, each failing."""
    store = ha.open_store(tmp_path / "s")
    with store.parquet.lock():
        store.parquet.commit({"samples": _samples("r1", ["a#1", "a#2"])})
        store.parquet.commit({"samples": _samples("r2", ["a#1"])})
    answers = _every_view(store)
    why = os.strerror(code).lower()

    def failing(*args: object, **kwargs: object) -> None:
        raise OSError(code, os.strerror(code))

    steps = [
        (pq, "write_table", f"{why} while writing batch 3 to "),
        (_manifest.json, "dump", f"{why} while publishing {store.root / 'manifest.json'}; "),
    ]
    for module, name, message in steps:
        with monkeypatch.context() as m:
            m.setattr(module, name, failing)
            with pytest.raises(StoreError, match=re.escape(message)) as exc, store.parquet.lock():
                store.parquet.commit({"samples": _samples("r3", ["a#1"])})
        assert "nothing was published, the store is unchanged" in str(exc.value)
        store.parquet.discard()
        assert _every_view(ha.open_store(store.root, create=False)) == answers
        assert not [p for p in store.root.iterdir() if p.name.endswith(".tmp")]
    with monkeypatch.context() as m:
        m.setattr(os, "rename", failing)  # the merged batch's move into batches/
        with (
            pytest.raises(StoreWriteError, match=f"{why} while compacting 2 batches") as exc,
            store.parquet.lock(),
        ):
            store.parquet.compact()
    assert "the merged batch was not published, the store reads as before" in str(exc.value)
    assert not any((store.root / "_staging").iterdir())
    assert _every_view(ha.open_store(store.root, create=False)) == answers


@pytest.mark.slow
def test_a_corrupt_manifest_is_a_clear_error_and_is_never_rewritten(
    sample_store: ha.Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "store"
    shutil.copytree(sample_store.root, root)
    answers = _every_view(ha.open_store(root, create=False))
    path = root / "manifest.json"
    good = path.read_text()
    data = json.loads(good)
    folder = root / "batches" / data["batches"][-1]["name"]
    broken = {
        "truncated": (good[: len(good) // 2], "is corrupt or truncated"),
        "hand-edited": (json.dumps({"batches": data["batches"]}), "missing field 'next_seq'"),
        "not an object": ("[]", "is corrupt or truncated"),
    }
    for text, message in broken.values():
        path.write_text(text)
        with pytest.raises(ManifestError, match=f"^{re.escape(str(path))}: .*{message}"):
            ha.open_store(root, create=False)
        assert main(["ingest", str(SAMPLE), "--store", str(root), "--quiet"]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"hylo-analytics ingest: error: {path}: ") and "Traceback" not in err
        assert path.read_text() == text  # left as found, for a person to restore
    path.write_text(good)
    shutil.move(folder, tmp_path / "aside")
    with pytest.raises(ManifestError) as exc:
        ha.open_store(root, create=False)
    assert str(exc.value).startswith(
        f"{path} lists batch {folder.name!r}, but {folder} is missing: the store cannot be read"
    )
    assert main(["sql", "--store", str(root), "SELECT 1"]) == 2
    assert "Traceback" not in capsys.readouterr().err
    assert path.read_text() == good
    shutil.move(tmp_path / "aside", folder)
    assert _every_view(ha.open_store(root, create=False)) == answers  # nothing was lost


def test_staged_names_skip_a_writer_folder_removed_while_listing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer drops its staging folder after its publish while a batch number is
    being reserved: the listing skips it (``Path.glob`` raised FileNotFoundError there, and a
    sharded ingest failed under load)."""
    from hylo_analytics.store import batches as store_mod

    staging = tmp_path / "_staging"
    (staging / "w-a" / f"{5:020d}.tmp").mkdir(parents=True)
    (staging / "w-a" / f"{7:020d}").mkdir()
    (staging / "w-b" / f"{9:020d}").mkdir(parents=True)
    (staging / f"{3:020d}.c1234abcd").mkdir()  # a compaction's, not a writer's
    real = os.listdir

    def listdir(path: str) -> list[str]:
        if str(path).endswith("w-b"):
            shutil.rmtree(path)  # its writer published and dropped it just now
        return real(path)

    monkeypatch.setattr(store_mod.os, "listdir", listdir)
    assert sorted(store_mod._staged_names(staging)) == [f"{5:020d}", f"{7:020d}"]
    assert store_mod._staged_names(tmp_path / "missing") == []


@pytest.mark.slow
def test_duckdb_memory_is_bounded_and_spills_to_a_temp_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No query exhausts the machine: the connection has a memory limit and spills past it."""
    # 128 MB: a limit well under the sort below, with room for DuckDB to pin the blocks it
    # spills (at 64 MB a window sort on two threads sometimes failed to pin one)
    monkeypatch.setenv("HYLO_ANALYTICS_MEMORY_LIMIT", "128MB")
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    store = ha.open_store(tmp_path / "s")
    limit = store.sql("select current_setting('memory_limit') as m")["m"].item()
    assert limit.replace(" ", "") in {"122.0MiB", "128.0MB", "122MiB"}
    spill = store.sql("select current_setting('temp_directory') as t")["t"].item()
    assert spill.startswith(str(tmp_path / "tmp"))
    # a sort of ~400 MB of rows: over the limit, so it spills to the folder and still answers
    got = store.sql(
        "select count(*) as n, max(r) as top from (select i, md5(i::varchar) || "
        "md5((i + 1)::varchar) as h, row_number() over (order by h) as r "
        "from range(3000000) as t(i))"
    )
    assert got.rows() == [(3_000_000, 3_000_000)]


def test_a_bad_memory_limit_names_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HYLO_ANALYTICS_MEMORY_LIMIT", "lots")
    with pytest.raises(ValueError, match="HYLO_ANALYTICS_MEMORY_LIMIT must be a size"):
        ha.open_store(tmp_path / "s")
