"""Orphan removal deletes only what the table wrote: never another table's files, a user's
files, anything behind a symbolic link, or a live file while snapshots expire under it; and a
dry run changes nothing, with or without the Iceberg mirror."""

from __future__ import annotations

import datetime as dt
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

import appendtable as at
from appendtable._state import TableState
from appendtable.cli import main
from appendtable.commit.snapshots import flush_hints
from appendtable.storage.local import LocalStorage
from appendtable.table import Table
from tests.helpers.clock import age, age_tree, past_every_file_ms
from tests.helpers.data import EVENTS, events
from tests.helpers.integrity import assert_table_intact
from tests.security.hostile import tree

FUTURE = 10**15
MIRROR = {"metadata.iceberg.storage": "table-location"}

pytestmark = pytest.mark.usefixtures("tables_stay_intact")


def _age_everything(root: Path) -> None:
    """Make every file older than a day (and than the temporary-file minimum age), once the
    hints written in the background have landed (their temp files come and go)."""
    age_tree(root, seconds=3 * 86400)


def test_a_table_nested_in_another_is_never_touched(tmp_path: Path) -> None:
    outer_root = tmp_path / "outer"
    outer = at.create_table(str(outer_root), EVENTS, partition_by=["day"])
    outer.append(events(0, 20))
    # Made elsewhere and moved in (create_table refuses to nest): named like one of the
    # outer table's own directories, and like a foreign one.
    for name in ("inner", "day=2030-01-01", "bucket-0"):
        made = at.create_table(str(tmp_path / f"made-{name}"), EVENTS, partition_by=["day"])
        made.append(events(100, 20))
        made.close()
        shutil.move(str(tmp_path / f"made-{name}"), str(outer_root / name))
    (outer_root / "README.md").write_text("the user's notes")
    _age_everything(tmp_path)
    before = {
        p: h
        for p, h in tree(outer_root).items()
        if not p.startswith(("schema", "snapshot", "manifest")) or "/" in p
    }
    nested = {
        p: h
        for p, h in tree(outer_root).items()
        if p.startswith(("inner/", "day=2030-01-01/", "bucket-0/"))
    }
    result = outer.remove_orphan_files(older_than=dt.timedelta(days=1), dry_run=False)
    after = tree(outer_root)
    assert result.files == []
    assert {p: after.get(p) for p in nested} == nested
    assert after["README.md"] == before["README.md"]
    assert {"README.md", "inner/", "day=2030-01-01/", "bucket-0/"} <= set(result.not_table_files)
    for name in ("inner", "day=2030-01-01", "bucket-0"):
        assert at.open_table(str(outer_root / name)).scan().count() == 20
    assert outer.scan().count() == 20


def test_a_table_inside_another_refuses_orphan_removal(tmp_path: Path) -> None:
    """A table whose root lies in another table's partition directory (moved there: create_table
    refuses it) would take the other table's data files there for its own orphans: both its dry
    and real runs are refused, naming the enclosing table, and nothing is deleted. A purge
    (whose last step removes orphans) is refused too, before it writes or expires anything
    (it had compacted and expired the whole history first: found by a docs-only hunt)."""
    outer_root = tmp_path / "outer"
    outer = at.create_table(str(outer_root), EVENTS, partition_by=["day"])
    outer.append(events(0, 20))
    partition = sorted(p for p in os.listdir(outer_root) if p.startswith("day="))[0]
    made = at.create_table(str(tmp_path / "made"), EVENTS, options={"write-only": True})
    made.append(events(100, 5))
    made.append(events(105, 5))
    assert made.delete([("seq", "=", 100)]) is not None
    made.close()
    for name in ("schema", "snapshot", "manifest"):
        shutil.move(str(tmp_path / "made" / name), str(outer_root / partition / name))
    _age_everything(tmp_path)
    before = tree(outer_root)
    inner = at.open_table(str(outer_root / partition))
    for dry_run in (True, False):
        with pytest.raises(at.PathOutsideTableError, match="inside the table at") as caught:
            inner.remove_orphan_files(older_than=dt.timedelta(days=1), dry_run=dry_run)
        assert caught.value.path == str(outer_root)
        with pytest.raises(at.PathOutsideTableError, match="purge the table") as caught:
            inner.purge(older_than=dt.timedelta(0), dry_run=dry_run)
        assert caught.value.path == str(outer_root)
    assert tree(outer_root) == before
    assert [s.id for s in inner.snapshots()] == [1, 2, 3]
    assert outer.scan().count() == 20


def test_user_files_in_the_table_layout_are_listed_never_deleted(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = at.create_table(str(root), EVENTS, partition_by=["day"])
    table.append(events(0, 30))
    users = [
        "README.md",
        "notes/plan.txt",
        "manifest/README",
        "snapshot/notes.txt",
        "schema/schema-notes",
        "day=2024-01-01/user.csv",
        "day=2024-01-01/bucket-0/user.csv",
        "day=2024-01-01/bucket-0/sub/data-x-0.parquet",
        "_staging/README",
        "metadata/notes.txt",
        "tag/notes",
    ]
    for path in users:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("mine")
    _age_everything(root)
    result = table.remove_orphan_files(older_than=past_every_file_ms(), dry_run=False)
    assert result.files == []
    assert all((root / p).read_text() == "mine" for p in users)
    listed = set(result.not_table_files)
    assert {
        "README.md",
        "notes/",
        "manifest/README",
        "snapshot/notes.txt",
        "day=2024-01-01/user.csv",
        "day=2024-01-01/bucket-0/user.csv",
        "day=2024-01-01/bucket-0/sub/",
        "_staging/README",
        "metadata/notes.txt",
        "tag/notes",
        "schema/schema-notes",
    } <= listed


def test_symbolic_links_are_listed_and_never_followed(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = at.create_table(str(root), EVENTS)
    table.append(events(0, 10))
    outside = tmp_path / "outside"
    (outside / "bucket-0").mkdir(parents=True)
    (outside / "bucket-0" / "data-0-0.parquet").write_bytes(b"canary")
    (outside / "data-1-0.parquet").write_bytes(b"canary")
    (root / "_staging").mkdir()
    os.symlink(outside, root / "_staging" / "abandoned")
    os.symlink(outside / "bucket-0", root / "bucket-7")
    os.symlink(outside / "data-1-0.parquet", root / "bucket-0" / "data-1-0.parquet")
    _age_everything(tmp_path)
    before = tree(outside)
    result = table.remove_orphan_files(older_than=past_every_file_ms(), dry_run=False)
    assert tree(outside) == before
    assert {"_staging/abandoned", "bucket-7", "bucket-0/data-1-0.parquet"} <= set(
        result.not_table_files
    )
    with pytest.raises(at.PathOutsideTableError, match="symbolic link"):
        table.staging_area("abandoned")  # re-opening it refuses
    area = table.staging_area()
    os.rmdir(root / area.path)
    os.symlink(outside, root / area.path)  # swapped for a link after it was made
    result = area.remove()
    assert result.deleted == () and tree(outside) == before
    assert table.scan().count() == 10


@pytest.mark.parametrize("mirror", [False, True])
def test_dry_runs_change_nothing_in_the_api_and_the_cli(
    tmp_path: Path, mirror: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "t"
    table = at.create_table(
        str(root), EVENTS, options={"write-only": True, **(MIRROR if mirror else {})}
    )
    for i in range(6):
        table.append(events(i * 10, 10))
    table.compact(full=True)
    if mirror:  # versions a real run would prune
        assert len([n for n in os.listdir(root / "metadata") if n.endswith(".metadata.json")]) > 2
    writer = table.writer()
    writer.write(events(100, 10))
    writer.prepare_commit()  # an abandoned write: orphans to list
    _age_everything(root)
    before = tree(root)
    listed = table.remove_orphan_files(older_than=past_every_file_ms(), dry_run=True)
    expired = table.expire_snapshots(retain_min=1, older_than_ms=FUTURE, dry_run=True)
    assert listed.files and expired.expired_snapshots and expired.deleted_data_files
    assert tree(root) == before
    for argv in (
        ["remove-orphans", str(root), "--older-than", "0s"],
        ["expire", str(root), "--older-than", "0s", "--retain-min", "1", "--dry-run"],
    ):
        assert main(argv) == 0
        assert "nothing was deleted" in capsys.readouterr().out
        assert tree(root) == before
    sizes = {p: os.path.getsize(root / p) for p in before if not p.endswith("/")}
    assert listed.bytes == sum(sizes[p] for p in listed.files)
    removed = table.remove_orphan_files(older_than=past_every_file_ms(), dry_run=False)
    assert set(listed.files) <= set(removed.files)
    # what a real run reports deleted counts the mirror versions its prune removed too
    assert removed.bytes == sum(sizes[p] for p in removed.files if p in sizes)
    assert removed.bytes >= listed.bytes
    assert table.scan().count() == 60


def test_the_mirror_prune_deletes_nothing_outside_metadata(tmp_path: Path) -> None:
    """An old Iceberg version naming files outside ``metadata/`` (outside the table, or the
    table's own data): the prune deletes none of them, only that version file."""
    import json

    root = tmp_path / "t"
    table = at.create_table(str(root), EVENTS, options={"write-only": True, **MIRROR})
    for i in range(3):
        table.append(events(i * 10, 10))
    (tmp_path / "victims").mkdir()
    (tmp_path / "victims" / "v1.txt").write_text("canary")
    data_file = table.files().column("path")[0].as_py()
    old = root / "metadata" / "v1.metadata.json"
    metadata = json.loads(old.read_text())
    metadata["snapshots"] = [
        {**metadata["snapshots"][0], "manifest-list": f"{root}/../victims/v1.txt"},
        {**metadata["snapshots"][0], "manifest-list": f"{root}/metadata/../../victims/v1.txt"},
        {**metadata["snapshots"][0], "snapshot-id": 99, "manifest-list": str(root / data_file)},
    ]
    old.write_text(json.dumps(metadata))
    _age_everything(tmp_path)
    existing = set(tree(root))
    result = table.remove_orphan_files(older_than=past_every_file_ms(), dry_run=False)
    assert set(result.files) <= existing  # it reports only files that were there
    assert (tmp_path / "victims" / "v1.txt").read_text() == "canary"
    assert (root / data_file).exists()
    assert "metadata/v1.metadata.json" in result.files and not old.exists()
    assert table.scan().count() == 30


def test_create_table_refuses_to_nest_tables(tmp_path: Path) -> None:
    at.create_table(str(tmp_path / "outer"), EVENTS)
    with pytest.raises(at.TableExistsError, match="inside the table"):
        at.create_table(str(tmp_path / "outer" / "a" / "inner"), EVENTS)
    with pytest.raises(at.TableExistsError, match="holds the table"):
        at.create_table(str(tmp_path), EVENTS)
    assert not (tmp_path / "outer" / "a").exists()
    assert not (tmp_path / "schema").exists()


class _Interleaved(LocalStorage):
    """A table root whose ``step``-th storage call first runs ``action`` (an expiration by
    another handle): an injected interleaving at one exact point of an operation."""

    def __init__(self, root: str, step: int, action: Callable[[], None]) -> None:
        super().__init__(root)
        self.calls = 0
        self._step = step
        self._action = action

    def _tick(self) -> None:
        self.calls += 1
        if self.calls == self._step:
            self._action()

    def read(self, path: str) -> bytes:
        self._tick()
        return super().read(path)

    def exists(self, path: str) -> bool:
        self._tick()
        return super().exists(path)

    def listnames(self, directory: str) -> list[str]:
        self._tick()
        return super().listnames(directory)

    def listdir(self, directory: str) -> list[at.storage.FileInfo]:  # type: ignore[name-defined]
        self._tick()
        return super().listdir(directory)


def _history(root: Path) -> None:
    """Six appends (six live files), a rollback to 4 (re-adding nothing new), two appends."""
    table = at.create_table(
        str(root), EVENTS, options={"write-only": True, "bucket": 2, "bucket-key": "key"}
    )
    for i in range(6):
        table.append(events(i * 10, 10))
    table.rollback_to(4)
    for i in range(6, 8):
        table.append(events(i * 10, 10))
    table.close()
    _age_everything(root)


def _expire_all_but_newest(table: at.Table) -> None:
    table.expire_snapshots(retain_min=1, older_than_ms=FUTURE)


def _expire_the_oldest(table: at.Table) -> None:
    table.expire_snapshots(retain_min=1, retain_max=7, older_than_ms=0)


@pytest.mark.parametrize("action", [_expire_all_but_newest, _expire_the_oldest])
def test_orphan_removal_keeps_live_files_whatever_expires_at_any_step(
    tmp_path: Path, action: Callable[[at.Table], None]
) -> None:
    """At every storage call of an orphan removal, another handle expires snapshots (all but
    the newest, or only the oldest); the removal must never delete a file a retained snapshot
    holds."""
    base = tmp_path / "base"
    _history(base)
    probe = _Interleaved(str(base), 0, lambda: None)
    schema = at.open_table(str(base))._state.schema
    Table(TableState(probe, schema)).remove_orphan_files(older_than=FUTURE, dry_run=True)
    assert probe.calls > 10
    for step in range(1, probe.calls + 1):
        root = tmp_path / f"run-{step}"
        shutil.copytree(base, root)
        other = at.open_table(str(root))
        storage = _Interleaved(str(root), step, lambda o=other: action(o))
        table = Table(TableState(storage, schema))
        table.remove_orphan_files(older_than=FUTURE, dry_run=False)
        assert at.open_table(str(root)).scan().count() == 60, f"step {step}"
        assert_table_intact(str(root))
        shutil.rmtree(root)


def test_orphan_removal_keeps_live_files_when_only_the_first_snapshot_expires_meanwhile(
    tmp_path: Path,
) -> None:
    """Appends only (no rollback, which is counted whole anyway): snapshot 1 alone expires at
    each storage call; the snapshot read next (2) must then count whole, since what 1 added
    is live in it (a mutation run found no test of this)."""
    base = tmp_path / "base"
    table = at.create_table(str(base), EVENTS, options={"write-only": True})
    for i in range(5):
        table.append(events(i * 10, 10))
    table.close()
    _age_everything(base)
    schema = at.open_table(str(base))._state.schema
    probe = _Interleaved(str(base), 0, lambda: None)
    Table(TableState(probe, schema)).remove_orphan_files(older_than=FUTURE, dry_run=True)
    for step in range(1, probe.calls + 1):
        root = tmp_path / f"run-{step}"
        shutil.copytree(base, root)
        other = at.open_table(str(root))
        storage = _Interleaved(
            str(root),
            step,
            lambda o=other: (
                o.expire_snapshots(retain_min=1, retain_max=4, older_than_ms=0) and None
            ),
        )
        Table(TableState(storage, schema)).remove_orphan_files(older_than=FUTURE, dry_run=False)
        assert at.open_table(str(root)).scan().count() == 50, f"step {step}"
        assert_table_intact(str(root))
        shutil.rmtree(root)


def test_orphan_removal_keeps_the_files_of_a_commit_landing_at_any_step(tmp_path: Path) -> None:
    """Files written long ago (a slow job) and committed while orphan removal runs, at each
    of its storage calls: the commit's files are never deleted."""
    base = tmp_path / "base"
    _history(base)
    schema = at.open_table(str(base))._state.schema
    probe = _Interleaved(str(base), 0, lambda: None)
    Table(TableState(probe, schema)).remove_orphan_files(older_than=FUTURE, dry_run=True)
    # Up to the last read of the snapshot log: a commit landing after the live set is known
    # is protected by the age cut-off only (documented), which FUTURE turns off.
    for step in range(1, probe.calls - 1):
        root = tmp_path / f"run-{step}"
        shutil.copytree(base, root)
        other = at.open_table(str(root))
        with other.writer() as writer:
            writer.write(events(1000, 10))
            messages = writer.prepare_commit()
        _age_everything(root)
        flush_hints()
        storage = _Interleaved(
            str(root), step, lambda o=other, m=messages: o.committer().commit(m) and None
        )
        Table(TableState(storage, schema)).remove_orphan_files(older_than=FUTURE, dry_run=False)
        assert at.open_table(str(root)).scan().count() == 70, f"step {step}"
        assert_table_intact(str(root))
        shutil.rmtree(root)


def test_a_temporary_file_of_a_live_write_is_never_an_orphan(tmp_path: Path) -> None:
    """A write in flight (a LATEST hint a commit writes in the background, a snapshot being
    published) has a temporary file beside its final name: whatever the cut-off, orphan
    removal leaves it until it is older than TEMP_FILE_MIN_AGE_MS, and then deletes it."""
    from appendtable.orphans import TEMP_FILE_MIN_AGE_MS

    root = tmp_path / "t"
    table = at.create_table(str(root), EVENTS)
    table.append(events(0, 10))
    live = root / "snapshot" / ".LATEST.0123456789abcdef0123456789abcdef.tmp"
    dead = root / "manifest" / ".manifest-x.fedcba9876543210fedcba9876543210.tmp"
    live.write_bytes(b"2")
    dead.write_bytes(b"half")
    age([dead], seconds=TEMP_FILE_MIN_AGE_MS / 1000 + 60)
    listed = table.remove_orphan_files(older_than=past_every_file_ms(), dry_run=True)
    assert listed.files == [str(dead.relative_to(root))]
    table.remove_orphan_files(older_than=past_every_file_ms(), dry_run=False)
    assert live.exists() and not dead.exists()
    live.unlink()


def test_a_dry_run_does_not_even_repair_a_missing_hint(tmp_path: Path) -> None:
    """Found by the docs-driven pass: with the EARLIEST hint gone, a dry run of expiration
    listed the snapshots and wrote the hint back: a change in the table's directory."""
    root = tmp_path / "t"
    table = at.create_table(str(root), EVENTS, options={"write-only": True})
    for i in range(5):
        table.append(events(i, 1))
    table.expire_snapshots(retain_min=2, older_than_ms=FUTURE)
    flush_hints()
    (root / "snapshot" / "EARLIEST").unlink()
    before = tree(root)
    fresh = at.open_table(str(root))
    assert fresh.expire_snapshots(
        retain_min=1, older_than_ms=FUTURE, dry_run=True
    ).expired_snapshots
    fresh.remove_orphan_files(older_than=FUTURE, dry_run=True)
    assert tree(root) == before
    fresh.expire_snapshots(retain_min=1, older_than_ms=FUTURE)
    assert (root / "snapshot" / "EARLIEST").read_text() == "5"
