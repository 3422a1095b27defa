"""An independent model of what was done to a table, and the check of every system table
against it.

``Model`` performs operations on a real table through the public API and records, by its own
bookkeeping only, what each snapshot must hold: its kind, schema, rows (as ``(day, id)``
pairs), data files per (partition, bucket), rollback target and watermark; and the table's
schemas, options, tags and consumers. ``check`` compares every system table with it, and with
what the storage itself holds (data files re-read with pyarrow, sizes from fsspec).

What the model assumes of the table (small files, ``write-only``): an append writes one file
per (partition, bucket) it touches; ``compact(full=True)`` leaves one file in each
(partition, bucket) that had several; an overwrite of a partition replaces its files.
"""

from __future__ import annotations

import collections
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import appendtable as at

SCHEMA = pa.schema([("day", pa.string()), ("id", pa.int64()), ("amount", pa.float64())])
#: Partition values, one of which needs escaping in a directory name, and null.
DAYS: tuple[str | None, ...] = ("mon", "tue", "a/b:c", None)
BUCKETS = 2
OPTIONS = {"bucket": str(BUCKETS), "bucket-key": "id", "write-only": "true"}
FOREVER = 2**62

Row = tuple[str | None, int]
Group = tuple[str, int]


def partition_name(day: str | None) -> str:
    """The partition text the docs promise, written out for the values the tests use."""
    if day is None:
        return "day=__DEFAULT_PARTITION__"
    return "day=" + day.replace("%", "%25").replace("/", "%2F").replace(":", "%3A")


def bucket_of(ids: Sequence[int]) -> list[int]:
    return [int(b) for b in at.bucket_ids([pa.array(ids, pa.int64())], BUCKETS)]


@dataclass(frozen=True)
class Facts:
    """What one snapshot must hold."""

    id: int
    kind: str
    schema_id: int
    rows: tuple[Row, ...]
    files: dict[Group, int]
    rollback_to: int | None = None
    watermark: int | None = None


@dataclass
class Model:
    table: at.Table
    snapshots: list[Facts] = field(default_factory=list)
    earliest: int = 1
    #: schema id -> (column names, options)
    schemas: dict[int, tuple[tuple[str, ...], dict[str, str]]] = field(default_factory=dict)
    current_schema: int = 0
    tags: dict[str, int] = field(default_factory=dict)
    consumers: dict[str, tuple[int, bool]] = field(default_factory=dict)
    next_row: int = 0
    started_ms: int = 0

    @staticmethod
    def create(uri: str) -> Model:
        table = at.create_table(uri, SCHEMA, partition_by=["day"], options=OPTIONS)
        model = Model(table, started_ms=int(time.time() * 1000) - 1)
        model.schemas[0] = (tuple(SCHEMA.names), dict(OPTIONS))
        return model

    # ---- state ------------------------------------------------------------------------------

    @property
    def latest(self) -> Facts | None:
        return self.snapshots[-1] if self.snapshots else None

    def facts(self, snapshot_id: int) -> Facts:
        return self.snapshots[snapshot_id - 1]

    @property
    def rows(self) -> tuple[Row, ...]:
        return self.latest.rows if self.latest else ()

    @property
    def files(self) -> dict[Group, int]:
        return dict(self.latest.files) if self.latest else {}

    @property
    def columns(self) -> tuple[str, ...]:
        return self.schemas[self.current_schema][0]

    def _landed(self, snapshot: at.Snapshot | None, facts: Facts) -> None:
        assert snapshot is not None and snapshot.id == facts.id, (snapshot, facts)
        self.snapshots.append(facts)

    def _next(
        self, kind: str, rows: Sequence[Row], files: dict[Group, int], **extra: object
    ) -> Facts:
        return Facts(
            id=len(self.snapshots) + 1,
            kind=kind,
            schema_id=self.current_schema,
            rows=tuple(sorted(rows, key=_row_key)),
            files={g: n for g, n in files.items() if n},
            **extra,  # type: ignore[arg-type]
        )

    def _data(self, day_counts: Sequence[tuple[str | None, int]]) -> tuple[pa.Table, list[Row]]:
        rows: list[Row] = []
        for day, count in day_counts:
            rows.extend((day, self.next_row + i) for i in range(count))
            self.next_row += count
        amounts = [None if i % 3 == 0 else i / 2 for _, i in rows]
        columns: dict[str, pa.Array] = {
            "day": pa.array([d for d, _ in rows], pa.string()),
            "id": pa.array([i for _, i in rows], pa.int64()),
        }
        names = self.columns
        data = pa.table(columns)
        for name in names[2:]:
            values = amounts if name == names[2] else [None] * len(rows)
            data = data.append_column(name, pa.array(values, pa.float64()))
        return data.select(list(names)), rows

    @staticmethod
    def _groups(rows: Sequence[Row]) -> set[Group]:
        buckets = bucket_of([i for _, i in rows])
        return {(partition_name(day), b) for (day, _), b in zip(rows, buckets, strict=True)}

    # ---- operations -------------------------------------------------------------------------

    def append(
        self, day_counts: Sequence[tuple[str | None, int]], watermark: int | None = None
    ) -> None:
        data, rows = self._data(day_counts)
        snapshot = self.table.append(data, watermark=watermark)
        if not rows and watermark is None:
            assert snapshot is None
            return
        files = self.files
        for group in self._groups(rows):
            files[group] = files.get(group, 0) + 1
        latest_watermark = self.latest.watermark if self.latest else None
        marks = [w for w in (latest_watermark, watermark) if w is not None]
        self._landed(
            snapshot,
            self._next(
                "APPEND", [*self.rows, *rows], files, watermark=max(marks) if marks else None
            ),
        )

    def _carry(self) -> dict[str, object]:
        return {"watermark": self.latest.watermark if self.latest else None}

    def compact(self) -> None:
        snapshot = self.table.compact(full=True)
        if not any(n > 1 for n in self.files.values()):
            assert snapshot is None
            return
        files = dict.fromkeys(self.files, 1)
        self._landed(snapshot, self._next("COMPACT", self.rows, files, **self._carry()))

    def overwrite(self, day: str, count: int) -> None:
        data, rows = self._data([(day, count)])
        snapshot = self.table.overwrite(data, partitions=[{"day": day}])
        name = partition_name(day)
        files = {g: n for g, n in self.files.items() if g[0] != name}
        for group in self._groups(rows):
            files[group] = 1
        kept = [r for r in self.rows if r[0] != day]
        self._landed(snapshot, self._next("OVERWRITE", [*kept, *rows], files, **self._carry()))

    def rollback(
        self,
        snapshot_id: int | None = None,
        *,
        tag: str | None = None,
        restore_schema: bool = False,
    ) -> None:
        """Roll back the data; the schema and options stay unless ``restore_schema``."""
        target = self.facts(self.tags[tag] if tag is not None else snapshot_id)  # type: ignore[arg-type]
        snapshot = (
            self.table.rollback_to(tag=tag, restore_schema=restore_schema)
            if tag is not None
            else self.table.rollback_to(target.id, restore_schema=restore_schema)
        )
        if restore_schema:
            self.current_schema = target.schema_id
        self._landed(
            snapshot,
            self._next(
                "OVERWRITE", target.rows, target.files, rollback_to=target.id, **self._carry()
            ),
        )

    def _alter(self, columns: tuple[str, ...], options: dict[str, str], snapshot: object) -> None:
        new_id = max(self.schemas) + 1
        self.schemas[new_id] = (columns, options)
        self.current_schema = new_id
        assert isinstance(snapshot, at.Snapshot)
        self._landed(snapshot, self._next("ALTER", self.rows, self.files, **self._carry()))

    def add_column(self, name: str) -> None:
        with self.table.update_schema() as update:
            update.add_column(name, pa.float64())
        options = dict(self.schemas[self.current_schema][1])
        self._alter((*self.columns, name), options, update.snapshot)

    def rename_column(self, old: str, new: str) -> None:
        with self.table.update_schema() as update:
            update.rename_column(old, new)
        columns = tuple(new if c == old else c for c in self.columns)
        self._alter(columns, dict(self.schemas[self.current_schema][1]), update.snapshot)

    def set_option(self, key: str, value: str) -> None:
        snapshot = self.table.set_options({key: value})
        options = {**self.schemas[self.current_schema][1], key: value}
        self._alter(self.columns, options, snapshot)

    def tag(self, name: str, snapshot_id: int | None = None) -> None:
        tagged = self.table.create_tag(name, snapshot_id)
        expected = snapshot_id if snapshot_id is not None else len(self.snapshots)
        assert tagged.id == expected
        self.tags[name] = expected

    def delete_tag(self, name: str) -> None:
        self.table.delete_tag(name)
        del self.tags[name]

    def register(self, consumer: str, snapshot_id: int, *, full: bool) -> None:
        """A consumer that starts at ``snapshot_id`` (registered at once, nothing read)."""
        mode = "from-snapshot-full" if full else "from-snapshot"
        self.table.stream(mode=mode, snapshot_id=snapshot_id, consumer_id=consumer)
        self.consumers[consumer] = (snapshot_id, full)

    def drain(self, consumer: str) -> None:
        """The consumer reads everything there is and commits: its position moves past the
        latest snapshot, also past those after the last one that gave it rows, which a
        stream skips (compactions, schema and option changes, overwrites, rollbacks)."""
        start, _ = self.consumers[consumer]
        reader = at.open_table(self.table.uri).stream(consumer_id=consumer)
        for _ in reader.batches(timeout=0):
            pass
        reader.commit()
        if start <= len(self.snapshots):
            self.consumers[consumer] = (len(self.snapshots) + 1, False)

    def delete_consumer(self, consumer: str) -> None:
        self.table.delete_consumer(consumer)
        del self.consumers[consumer]

    def expire(self, retain: int) -> None:
        self.table.expire_snapshots(retain_min=retain, retain_max=retain, older_than_ms=FOREVER)
        floor = len(self.snapshots) - retain + 1
        needed = [n for n, _ in self.consumers.values()]
        if needed:
            floor = min(floor, *needed)
        self.earliest = max(self.earliest, floor)


def _row_key(row: Row) -> tuple[bool, str, int]:
    return (row[0] is None, row[0] or "", row[1])


# ---- the checks ---------------------------------------------------------------------------------


def read_system(table: at.Table, name: str, **when: object) -> pa.Table:
    """A system table, checked against its declared schema (types, nullability)."""
    result = table.system_table(name, **when)  # type: ignore[arg-type]
    declared = at.system_table_schema(name)
    assert result.schema.equals(declared), (name, result.schema, declared)
    for column in declared:
        if not column.nullable:
            assert result.column(column.name).null_count == 0, (name, column.name)
    return result


def check(model: Model) -> None:
    """Every system table against the model (and the storage)."""
    table = at.open_table(model.table.uri)  # a fresh handle: nothing cached on the model's
    _check_snapshots(table, model)
    _check_schemas_and_options(table, model)
    _check_tags(table, model)
    _check_consumers(table, model)
    for facts in model.snapshots[model.earliest - 1 :]:
        _check_contents(table, model, facts, snapshot_id=facts.id)
    if model.latest is not None:
        _check_contents(table, model, model.latest)  # the default: the latest
    for name, snapshot_id in model.tags.items():
        _check_contents(table, model, model.facts(snapshot_id), tag=name)
    if model.latest is None:
        for name in ("files", "manifests", "partitions", "buckets"):
            assert read_system(table, name).num_rows == 0


def _check_snapshots(table: at.Table, model: Model) -> None:
    rows = read_system(table, "snapshots").to_pylist()
    retained = model.snapshots[model.earliest - 1 :]
    assert [r["snapshot_id"] for r in rows] == [f.id for f in retained]
    now = int(time.time() * 1000) + 1
    previous_time = model.started_ms
    for row, facts in zip(rows, retained, strict=True):
        assert row["parent_id"] == (None if facts.id == 1 else facts.id - 1)
        assert row["commit_kind"] == facts.kind
        assert row["schema_id"] == facts.schema_id
        assert row["total_record_count"] == len(facts.rows)
        before = len(model.facts(facts.id - 1).rows) if facts.id > 1 else 0
        assert row["delta_record_count"] == len(facts.rows) - before
        assert row["total_file_count"] == sum(facts.files.values())
        properties = dict(row["properties"])
        assert properties.get("rollback-to") == (
            None if facts.rollback_to is None else str(facts.rollback_to)
        )
        watermark = row["watermark"]
        assert (None if watermark is None else _ms(watermark)) == facts.watermark
        committed = _ms(row["commit_time"])
        assert previous_time <= committed <= now
        previous_time = committed
        assert row["commit_identifier"] == -1 and row["commit_user"]
    history = table.history()
    assert history["id"].to_pylist() == [f.id for f in retained]
    assert history["total_rows"].to_pylist() == [len(f.rows) for f in retained]


def _ms(moment: object) -> int:
    return int(pa.scalar(moment, pa.timestamp("ms", tz="UTC")).value)


def _check_schemas_and_options(table: at.Table, model: Model) -> None:
    rows = read_system(table, "schemas").to_pylist()
    assert [r["schema_id"] for r in rows] == sorted(model.schemas)
    for row in rows:
        columns, options = model.schemas[row["schema_id"]]
        assert [f["name"] for f in _json(row["fields"])] == list(columns)
        assert row["columns"].split(" ")[0] == columns[0]
        assert dict(row["options"]) == options
        assert row["partition_keys"] == ["day"]
        assert row["current"] == (row["schema_id"] == model.current_schema)
    options = read_system(table, "options").to_pylist()
    expected = model.schemas[model.current_schema][1]
    assert [(r["key"], r["value"]) for r in options] == sorted(expected.items())


def _json(text: str) -> list[dict[str, object]]:
    loaded = json.loads(text)
    assert isinstance(loaded, list)
    return loaded


def _check_tags(table: at.Table, model: Model) -> None:
    rows = read_system(table, "tags").to_pylist()
    assert [r["tag_name"] for r in rows] == sorted(model.tags)
    for row in rows:
        facts = model.facts(model.tags[row["tag_name"]])
        assert row["snapshot_id"] == facts.id
        assert row["schema_id"] == facts.schema_id
        assert row["record_count"] == len(facts.rows)
        assert row["file_count"] == sum(facts.files.values())
        assert row["snapshot_expired"] == (facts.id < model.earliest)
        assert _ms(row["create_time"]) >= _ms(row["commit_time"])


def _check_consumers(table: at.Table, model: Model) -> None:
    rows = read_system(table, "consumers").to_pylist()
    got = {r["consumer_id"]: (r["next_snapshot_id"], r["reads_full_snapshot"]) for r in rows}
    assert got == model.consumers
    assert [r["consumer_id"] for r in rows] == sorted(model.consumers)
    for row in rows:
        assert _ms(row["update_time"]) >= model.started_ms


def _check_contents(table: at.Table, model: Model, facts: Facts, **when: object) -> None:
    files = read_system(table, "files", **when)
    _check_files(table, model, facts, files, **when)
    rolled_back = any(f.rollback_to is not None for f in model.snapshots[: facts.id])
    manifests = read_system(table, "manifests", **when)
    _check_manifests(table, facts, manifests, rolled_back=rolled_back)
    _check_aggregates(
        facts,
        files,
        read_system(table, "partitions", **when),
        read_system(table, "buckets", **when),
    )


def _open(uri: str) -> pa.Table:
    with fsspec.open(uri, "rb") as handle:
        return pq.read_table(handle)


def _size(uri: str) -> int:
    filesystem, path = fsspec.core.url_to_fs(uri)
    return int(filesystem.size(path))


def _check_files(
    table: at.Table, model: Model, facts: Facts, files: pa.Table, **when: object
) -> None:
    rows: list[Row] = []
    groups: collections.Counter[Group] = collections.Counter()
    columns = model.schemas[facts.schema_id][0]
    for file in files.to_pylist():
        data = _open(file["file_uri"])
        days, ids = data["day"].to_pylist(), data["id"].to_pylist()
        rows.extend(zip(days, ids, strict=True))
        assert file["record_count"] == data.num_rows > 0
        assert file["file_size_in_bytes"] == _size(file["file_uri"])
        assert file["file_uri"].endswith(file["file_path"])
        assert {partition_name(d) for d in days} == {file["partition"]}
        assert set(bucket_of(ids)) == {file["bucket"]}
        assert file["file_format"] == "parquet"
        groups[(file["partition"], file["bucket"])] += 1
        nulls = dict(file["null_value_counts"])
        assert list(nulls) == list(columns)
        low, high = dict(file["min_value_stats"]), dict(file["max_value_stats"])
        assert list(low) == list(high) == list(columns)
        assert (low["id"], high["id"]) == (str(min(ids)), str(max(ids)))
        assert nulls["id"] == 0
        assert nulls["day"] == days.count(None)
        amount = columns[2]
        written = [c for c in data.column_names if c not in ("day", "id")]
        assert nulls[amount] == (data[written[0]].null_count if written else data.num_rows)
        for name in columns[len(written) + 2 :]:  # added after the file was written
            assert nulls[name] == data.num_rows and low[name] is None and high[name] is None
    assert sorted(rows, key=_row_key) == list(facts.rows)
    assert dict(groups) == facts.files
    order = [
        (_row_key((_day_of(p), 0))[:2], b, s)
        for p, b, s in zip(
            files["partition"].to_pylist(),
            files["bucket"].to_pylist(),
            files["min_sequence_number"].to_pylist(),
            strict=True,
        )
    ]
    assert order == sorted(order)  # partitions in value order (null last), buckets, writes
    listing = table.files(facts.id) if "snapshot_id" in when or not when else None
    if listing is not None:  # Table.files() is the same listing under its own names
        assert listing["path"].to_pylist() == files["file_path"].to_pylist()
        assert listing["rows"].to_pylist() == files["record_count"].to_pylist()
        assert listing["bytes"].to_pylist() == files["file_size_in_bytes"].to_pylist()
        assert listing["created"].to_pylist() == files["creation_time"].to_pylist()
        assert listing["partition"].to_pylist() == files["partition"].to_pylist()


def _day_of(partition: str) -> str | None:
    return next(d for d in DAYS if partition_name(d) == partition)


def _check_manifests(
    table: at.Table, facts: Facts, manifests: pa.Table, *, rolled_back: bool
) -> None:
    kinds = manifests["manifest_list"].to_pylist()
    assert kinds == sorted(kinds)  # BASE before DELTA
    for manifest in manifests.to_pylist():
        uri = table.uri.rstrip("/") + "/manifest/" + manifest["file_name"]
        assert manifest["file_size"] == _size(uri)
        assert 0 <= manifest["min_bucket"] <= manifest["max_bucket"] < BUCKETS
        low, high = dict(manifest["min_partition_stats"]), dict(manifest["max_partition_stats"])
        assert list(low) == list(high) == ["day"]
    added = pc.sum(manifests["num_added_files"]).as_py() or 0
    deleted = pc.sum(manifests["num_deleted_files"]).as_py() or 0
    live = sum(facts.files.values())
    # A file is live when added and not deleted; a rollback writes a fresh base and deletes,
    # in its delta, files that base lacks (so its manifests, and its descendants' until they
    # are merged, delete more than they cancel).
    assert added - deleted <= live <= added
    if not rolled_back:
        assert added - deleted == live


def _check_aggregates(
    facts: Facts, files: pa.Table, partitions: pa.Table, buckets: pa.Table
) -> None:
    per_partition: collections.Counter[str] = collections.Counter(
        partition_name(d) for d, _ in facts.rows
    )
    assert dict(
        zip(
            partitions["partition"].to_pylist(), partitions["record_count"].to_pylist(), strict=True
        )
    ) == dict(per_partition)
    file_counts: collections.Counter[str] = collections.Counter()
    for (name, _bucket), count in facts.files.items():
        file_counts[name] += count
    assert dict(
        zip(partitions["partition"].to_pylist(), partitions["file_count"].to_pylist(), strict=True)
    ) == dict(file_counts)
    assert set(partitions["total_buckets"].to_pylist()) <= {BUCKETS}
    assert {
        (p, b): n
        for p, b, n in zip(
            buckets["partition"].to_pylist(),
            buckets["bucket"].to_pylist(),
            buckets["file_count"].to_pylist(),
            strict=True,
        )
    } == facts.files
    assert_aggregates_of(files, partitions, buckets)


def assert_aggregates_of(files: pa.Table, partitions: pa.Table, buckets: pa.Table) -> None:
    """``partitions`` and ``buckets`` are what a pyarrow-compute aggregation of ``files``
    gives (each group summed with pc over a mask: no group_by shared with the code)."""
    names = files["partition"].to_pylist()
    expected_partitions = []
    for name in dict.fromkeys(names):
        mask = pc.equal(files["partition"], name)
        part = files.filter(mask)
        expected_partitions.append(
            {
                "partition": name,
                "record_count": pc.sum(part["record_count"]).as_py(),
                "file_size_in_bytes": pc.sum(part["file_size_in_bytes"]).as_py(),
                "file_count": part.num_rows,
                "last_update_time": pc.max(part["creation_time"]).as_py(),
                "bucket_count": len(pc.unique(part["bucket"])),
            }
        )
    got = partitions.drop_columns(["total_buckets"]).to_pylist()
    assert got == expected_partitions
    keys = list(dict.fromkeys(zip(names, files["bucket"].to_pylist(), strict=True)))
    expected_buckets = []
    for name, bucket in keys:
        mask = pc.and_(pc.equal(files["partition"], name), pc.equal(files["bucket"], bucket))
        part = files.filter(mask)
        expected_buckets.append(
            {
                "partition": name,
                "bucket": bucket,
                "record_count": pc.sum(part["record_count"]).as_py(),
                "file_size_in_bytes": pc.sum(part["file_size_in_bytes"]).as_py(),
                "file_count": part.num_rows,
                "last_update_time": pc.max(part["creation_time"]).as_py(),
            }
        )
    assert buckets.to_pylist() == expected_buckets
