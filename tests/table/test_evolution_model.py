"""Random sequences of allowed and refused schema changes, interleaved with appends,
compactions, expirations, time travel and streams, compared after every step with a model
that stores each row by field id."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import appendtable as at

FOREVER = 2**62
BASE = pa.schema(
    [
        pa.field("p", pa.string(), nullable=False),  # partition key
        pa.field("k", pa.int64(), nullable=False),  # bucket key
        pa.field("rid", pa.int64(), nullable=False),  # unique row id, never changed
    ]
)
TYPES = {"int32": pa.int32(), "int64": pa.int64(), "float32": pa.float32(), "string": pa.string()}
WIDER = {"int32": "int64", "float32": "float64"}


@dataclass
class Column:
    id: int  # the model's own id (the order of creation), never reused
    name: str
    kind: str


@dataclass
class Model:
    """Rows as {model column id: value}; columns in table order."""

    columns: list[Column] = field(default_factory=list)
    rows: list[dict[int, Any]] = field(default_factory=list)
    next_id: int = 0
    next_rid: int = 0

    def add(self, name: str, kind: str) -> None:
        self.columns.append(Column(self.next_id, name, kind))
        self.next_id += 1

    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def value(self, column: Column, rid: int) -> Any:
        if column.kind in ("int32", "int64"):
            return rid * 3 + column.id
        if column.kind in ("float32", "float64"):
            return (rid + column.id) * 0.5  # exact in float32
        return f"{column.name}-{rid}"

    def expected(self, columns: list[Column]) -> list[dict[str, Any]]:
        return sorted(
            ({c.name: row.get(c.id) for c in columns} for row in self.rows),
            key=lambda r: r["rid"],
        )


def _arrow(column: Column) -> pa.DataType:
    return {"float64": pa.float64(), **TYPES}[column.kind]


operations = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 6)),
        st.tuples(st.just("add"), st.sampled_from(sorted(TYPES))),
        st.tuples(st.just("rename"), st.integers(0, 50)),
        st.tuples(st.just("drop"), st.integers(0, 50)),
        st.tuples(st.just("widen"), st.integers(0, 50)),
        st.tuples(st.just("move"), st.integers(0, 50)),
        st.tuples(st.just("refused"), st.integers(0, 5)),
        st.tuples(st.just("compact"), st.booleans()),
        st.tuples(st.just("expire"), st.integers(1, 3)),
        st.tuples(st.just("stream"), st.integers(0, 3)),
        st.tuples(st.just("travel"), st.integers(0, 50)),
        st.tuples(st.just("merge"), st.integers(1, 3)),
    ),
    min_size=1,
    max_size=25,
)


def _frozen(columns: list[Column]) -> list[Column]:
    """The columns as they are now (the model renames and widens them in place)."""
    return [Column(c.id, c.name, c.kind) for c in columns]


def _changeable(model: Model) -> list[Column]:
    return [c for c in model.columns if c.name not in ("p", "k", "rid")]


def _read(table: at.Table, **scan: Any) -> list[dict[str, Any]]:
    return sorted(table.scan(**scan).to_arrow().to_pylist(), key=lambda r: r["rid"])


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=operations)
def test_random_changes_match_the_model(tmp_path_factory: Any, ops: list[tuple[str, Any]]) -> None:
    uri = str(tmp_path_factory.mktemp("evolve") / "t")
    table = at.create_table(
        uri,
        BASE,
        partition_by=["p"],
        options={"bucket": 2, "bucket-key": "k", "write-only": True, "commit.fsync": False},
    )
    model = Model()
    for name in BASE.names:
        model.add(name, "string" if name == "p" else "int64")
    # snapshot id -> (columns then, expected rows then)
    history: dict[int, tuple[list[Column], list[dict[str, Any]]]] = {}
    streams: list[tuple[at.StreamReader, list[Column], int]] = []

    def remember() -> None:
        latest = table.latest_snapshot()
        if latest is not None:
            history[latest.id] = (_frozen(model.columns), model.expected(model.columns))

    def rows_for(count: int, columns: list[Column]) -> pa.Table:
        start = model.next_rid
        model.next_rid += count
        data: dict[str, Any] = {}
        for column in columns:
            values = [
                ("a" if rid % 2 else "b")
                if column.name == "p"
                else rid % 5
                if column.name == "k"
                else rid
                if column.name == "rid"
                else model.value(column, rid)
                for rid in range(start, start + count)
            ]
            data[column.name] = pa.array(values, _arrow(column))
        for rid in range(start, start + count):
            model.rows.append({c.id: data[c.name][rid - start].as_py() for c in columns})
        return pa.table(data)

    for counter, (op, arg) in enumerate(ops, start=1):
        changeable = _changeable(model)
        if op == "append":
            table.append(rows_for(arg, model.columns))
        elif op == "merge":
            # The data has a new column and lacks the last changeable one (if any).
            new = Column(model.next_id, f"m{counter}", "string")
            missing = changeable[-1] if changeable else None
            kept = [c for c in model.columns if c is not missing]
            data = rows_for(arg, [*kept, new])
            model.columns.append(new)
            model.next_id += 1
            table.append(data, schema_mode="merge")
        elif op == "add":
            name = f"c{counter}"
            with table.update_schema() as update:
                update.add_column(name, TYPES[arg])
            model.add(name, arg)
        elif op == "rename" and changeable:
            column = changeable[arg % len(changeable)]
            new_name = f"r{counter}"
            with table.update_schema() as update:
                update.rename_column(column.name, new_name)
            column.name = new_name
        elif op == "drop" and changeable:
            column = changeable[arg % len(changeable)]
            with table.update_schema() as update:
                update.drop_column(column.name)
            model.columns.remove(column)
        elif op == "widen":
            narrow = [c for c in changeable if c.kind in WIDER]
            if narrow:
                column = narrow[arg % len(narrow)]
                wider = WIDER[column.kind]
                with table.update_schema() as update:
                    update.update_column(
                        column.name, type=pa.float64() if wider == "float64" else pa.int64()
                    )
                column.kind = wider
        elif op == "move" and changeable:
            column = changeable[arg % len(changeable)]
            with table.update_schema() as update:
                update.move_first(column.name)
            model.columns.remove(column)
            model.columns.insert(0, column)
        elif op == "refused":
            before = (table.schema_id, table.latest_snapshot())
            refusals = [
                lambda u: u.drop_column("p"),
                lambda u: u.rename_column("p", "q"),
                lambda u: u.update_column("k", type=pa.float64()),
                lambda u: u.drop_column("k"),
                lambda u: u.rename_column("rid", "p"),
                lambda u: u.update_column("rid", type=pa.int32()),
            ]
            with pytest.raises(at.InvalidSchemaError), table.update_schema() as update:
                update.add_column(f"never{counter}", pa.int8())
                refusals[arg](update)
            assert (table.schema_id, table.latest_snapshot()) == before
        elif op == "compact":
            table.compact(full=arg)
        elif op == "expire":
            table.expire_snapshots(retain_min=arg, retain_max=arg, older_than_ms=FOREVER)
            retained = {s.id for s in table.snapshots()}
            for snapshot_id in list(history):
                if snapshot_id not in retained:
                    del history[snapshot_id]
        elif op == "stream":
            # A consumer id keeps the snapshots it still needs from expiring.
            reader = table.stream(mode="latest", consumer_id=f"s{counter}")
            streams.append((reader, _frozen(model.columns), len(model.rows)))
        elif op == "travel" and history:
            snapshot_id = sorted(history)[arg % len(history)]
            columns, expected = history[snapshot_id]
            assert _read(table, snapshot_id=snapshot_id) == expected
            assert table.scan(snapshot_id=snapshot_id).output_schema.names == [
                c.name for c in columns
            ]
        remember()
        # After every step: the table reads as the model, in the model's schema.
        assert table.schema.names == model.names()
        assert _read(table) == model.expected(model.columns)
    # Streams opened along the way got exactly the rows written after them, in their schema
    # (columns are matched by id: later renames do not move values; later drops read null).
    for reader, columns, seen in streams:
        rows = sorted(
            (r for b in reader.batches(timeout=0) for r in b.to_pylist()), key=lambda r: r["rid"]
        )
        expected_rows = sorted(
            ({c.name: row.get(c.id) for c in columns} for row in model.rows[seen:]),
            key=lambda r: r["rid"],
        )
        assert rows == expected_rows


def test_a_reopened_table_after_random_changes_reads_the_same(tmp_path: Path) -> None:
    """A fixed sequence, reopened from storage: nothing depends on the handle's cache."""
    uri = str(tmp_path / "t")
    table = at.create_table(uri, BASE, partition_by=["p"])
    table.append(pa.table({"p": ["a"], "k": [1], "rid": [0]}, schema=BASE))
    with table.update_schema() as update:
        update.add_column("x", pa.int32())
        update.rename_column("rid", "row")
    with table.update_schema() as update:
        update.update_column("x", type=pa.int64())
        update.move_first("x")
    reopened = at.open_table(uri)
    assert reopened.schema.names == ["x", "p", "k", "row"]
    assert reopened.scan().to_arrow().to_pylist() == [{"x": None, "p": "a", "k": 1, "row": 0}]
