"""A model test of rollback: random sequences of appends, option changes (retention, the
Iceberg mirror on and off), tags created and deleted, rollbacks to snapshots and to tags (with
and without ``restore_schema``), compactions, expirations and orphan removals. After every
step the table is checked against a model of the rows each snapshot holds and of the options
and tags, and, whenever the mirror is on, pyiceberg reads the mirror: the same rows for the
latest snapshot and for every tag, tags as refs, and no reference to a missing file."""

from __future__ import annotations

import datetime as dt
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from pyiceberg.table import StaticTable

import appendtable as at
from appendtable.commit.snapshots import flush_hints
from appendtable.metadata.avro import read_container
from tests.helpers.long_runs import scaled

FOREVER = 2**62
SCHEMA = pa.schema([("day", pa.string()), ("k", pa.int64()), ("v", pa.string())])
MIRROR_KEY = "metadata.iceberg.storage"
RETENTION_KEY = "snapshot.num-retained.min"
TAG_NAMES = ["t1", "t2", "t3"]
BASE_OPTIONS = {"write-only": "true", "compaction.min.file-num": "2"}


def _keys(table: pa.Table) -> frozenset[int]:
    return frozenset(table.column("k").to_pylist())


class RollbackModel(RuleBasedStateMachine):
    """The rows of every snapshot and tag, the options of every snapshot, and the tags."""

    def __init__(self) -> None:
        super().__init__()
        self.root = tempfile.mkdtemp(prefix="appendtable-rollback-model-")
        self.table = at.create_table(
            f"{self.root}/t", SCHEMA, partition_by=["day"], options=BASE_OPTIONS
        )
        self.next_key = 0
        self.rows: frozenset[int] = frozenset()
        self.options: dict[str, str] = dict(BASE_OPTIONS)
        self.rows_at: dict[int, frozenset[int]] = {}
        self.options_at: dict[int, dict[str, str]] = {}
        self.tags: dict[str, int] = {}

    def teardown(self) -> None:
        flush_hints()
        shutil.rmtree(self.root, ignore_errors=True)

    # ---- helpers ------------------------------------------------------------------------------

    def _landed(self, snapshot: at.Snapshot | None) -> None:
        if snapshot is not None:
            self.rows_at[snapshot.id] = self.rows
            self.options_at[snapshot.id] = dict(self.options)

    def _retained(self) -> list[int]:
        return [s.id for s in self.table.snapshots()]

    @property
    def _has_rows_or_snapshots(self) -> bool:
        return bool(self.rows_at)

    # ---- rules ----------------------------------------------------------------------------

    @rule(count=st.integers(1, 4), day=st.sampled_from(["mon", "tue"]))
    def append(self, count: int, day: str) -> None:
        keys = range(self.next_key, self.next_key + count)
        self.next_key += count
        data = pa.table(
            {"day": [day] * count, "k": pa.array(keys, pa.int64()), "v": [f"v{k}" for k in keys]},
            schema=SCHEMA,
        )
        snapshot = self.table.append(data)
        self.rows = self.rows | frozenset(keys)
        self._landed(snapshot)

    @rule(retain=st.sampled_from([1, 2, 3, 500]))
    def set_retention(self, retain: int) -> None:
        snapshot = self.table.set_options({RETENTION_KEY: retain})
        changed = self.options.get(RETENTION_KEY) != str(retain)
        assert (snapshot is not None) == changed
        self.options[RETENTION_KEY] = str(retain)
        self._landed(snapshot)

    @rule(on=st.booleans())
    def switch_mirror(self, on: bool) -> None:
        if on:
            snapshot = self.table.set_options({MIRROR_KEY: "table-location"})
            self.options[MIRROR_KEY] = "table-location"
        else:
            snapshot = self.table.unset_options([MIRROR_KEY])
            self.options.pop(MIRROR_KEY, None)
        self._landed(snapshot)

    @precondition(lambda self: self._has_rows_or_snapshots)
    @rule(name=st.sampled_from(TAG_NAMES), data=st.data())
    def create_tag(self, name: str, data: st.DataObject) -> None:
        target = data.draw(st.sampled_from(self._retained()))
        if name in self.tags:
            with pytest.raises(at.TagExistsError):
                self.table.create_tag(name, target)
            return
        self.table.create_tag(name, target)
        self.tags[name] = target

    @rule(name=st.sampled_from(TAG_NAMES))
    def delete_tag(self, name: str) -> None:
        if name not in self.tags:
            with pytest.raises(at.TagNotFoundError):
                self.table.delete_tag(name)
            return
        self.table.delete_tag(name)
        del self.tags[name]

    def _rolled_back(self, snapshot: at.Snapshot, target: int, restore: bool) -> None:
        self.rows = self.rows_at[target]
        if restore:
            self.options = dict(self.options_at[target])
        self._landed(snapshot)
        assert snapshot.properties["rollback-to"] == str(target)

    @precondition(lambda self: self._has_rows_or_snapshots)
    @rule(data=st.data(), restore=st.booleans())
    def rollback_to_snapshot(self, data: st.DataObject, restore: bool) -> None:
        target = data.draw(st.sampled_from(self._retained()))
        snapshot = self.table.rollback_to(target, restore_schema=restore)
        self._rolled_back(snapshot, target, restore)

    @precondition(lambda self: bool(self.tags))
    @rule(data=st.data(), restore=st.booleans())
    def rollback_to_tag(self, data: st.DataObject, restore: bool) -> None:
        name = data.draw(st.sampled_from(sorted(self.tags)))
        snapshot = self.table.rollback_to(tag=name, restore_schema=restore)
        self._rolled_back(snapshot, self.tags[name], restore)

    @rule()
    def compact(self) -> None:
        self._landed(self.table.compact(full=True))

    @rule()
    def expire(self) -> None:
        before = self._retained()
        retain = int(self.options.get(RETENTION_KEY, "10"))
        result = self.table.expire_snapshots(older_than_ms=FOREVER)
        after = self._retained()
        expected = before[-retain:] if len(before) - retain <= 50 else before[50:]
        assert after == expected, (before, retain, result)
        assert result.expired_snapshots == [i for i in before if i not in after]

    @rule()
    def remove_orphans(self) -> None:
        self.table.remove_orphan_files(older_than=dt.timedelta(0), dry_run=False)

    # ---- checks ---------------------------------------------------------------------------

    @invariant()
    def table_matches_the_model(self) -> None:
        table = self.table
        assert _keys(table.scan().to_arrow()) == self.rows
        assert table.options == self.options
        for snapshot_id in self._retained():
            assert (
                _keys(table.scan(snapshot_id=snapshot_id).to_arrow()) == self.rows_at[snapshot_id]
            ), snapshot_id
        assert table.tags() == self.tags
        for name, snapshot_id in self.tags.items():
            assert _keys(table.scan(tag=name).to_arrow()) == self.rows_at[snapshot_id], name

    @invariant()
    def the_mirror_matches_the_model(self) -> None:
        location = self.table.iceberg_metadata_location()
        if MIRROR_KEY not in self.options:
            assert location is None
            return
        latest = self.table.latest_snapshot()
        if latest is None:
            return
        assert location is not None
        iceberg = StaticTable.from_metadata(location)
        metadata = iceberg.metadata
        assert metadata.current_snapshot_id == latest.id
        assert _keys(iceberg.scan().to_arrow()) == self.rows
        refs = {
            name: ref.snapshot_id
            for name, ref in metadata.refs.items()
            if str(ref.snapshot_ref_type) == "tag"
        }
        assert refs == self.tags
        for name, snapshot_id in self.tags.items():
            theirs = _keys(iceberg.scan(snapshot_id=snapshot_id).to_arrow())
            assert theirs == self.rows_at[snapshot_id], name
        listed = {s.snapshot_id for s in metadata.snapshots}
        assert set(self._retained()[-100:]) | set(self.tags.values()) == listed
        _no_missing_file(metadata.snapshots)


def _no_missing_file(snapshots: list[Any]) -> None:
    for snapshot in snapshots:
        manifest_list = Path(snapshot.manifest_list)
        assert manifest_list.exists(), manifest_list
        _, lists = read_container(manifest_list.read_bytes())
        for entry in lists:
            manifest = Path(entry["manifest_path"])
            assert manifest.exists(), manifest
            _, files = read_container(manifest.read_bytes())
            for record in files:
                assert Path(record["data_file"]["file_path"]).exists()


RollbackModel.TestCase.settings = settings(
    max_examples=25,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
test_rollback_model = RollbackModel.TestCase


@pytest.mark.slow
def test_rollback_model_many_examples() -> None:
    """The same model, longer (the slow tier; longest with APPENDTABLE_LONG_TESTS)."""
    run = RollbackModel.TestCase()
    run.settings = settings(
        max_examples=scaled(200, 40),
        stateful_step_count=50,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    run.runTest()
