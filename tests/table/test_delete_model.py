"""A model test of deletes: random appends, deletes (deletion vectors on one table,
copy-on-write on another, driven alike), compactions, expirations, rollbacks, tags, purges,
time travel and a stream, compared after every step with a model of the rows.

The model is a pyarrow table of the live rows per snapshot of each table; a delete's expected
rows are computed with pyarrow compute (``pc.field`` expressions; a null never matches), never
through the library. The stream (started before anything was written) must deliver each row at
most once, never a row a delete removed before the stream delivered it, and every row that no
delete's filter matched."""

from __future__ import annotations

import datetime as dt
import shutil
import tempfile
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import appendtable as at
from appendtable.commit.snapshots import flush_hints
from tests.helpers.long_runs import scaled

FOREVER = 2**62
SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("k", pa.int64()), ("v", pa.string())])
MODES = {"dv": "true", "cow": "false"}
WORDS = ["", "a", "b", "ab", "zz", "é", None]
TAGS = ["t1", "t2"]

_OPS = st.sampled_from(["=", "!=", "<", ">=", "in"])


@st.composite
def predicates(draw: st.DrawFn) -> tuple[str, str, Any]:
    column = draw(st.sampled_from(["id", "k", "v", "p"]))
    op = draw(_OPS)
    values: st.SearchStrategy[Any]
    if column == "id":
        values = st.integers(-2, 120)
    elif column == "k":
        values = st.integers(-4, 4)
    elif column == "p":
        values = st.sampled_from(["x", "y"])
    else:
        values = st.sampled_from([w for w in WORDS if w is not None])
    if op == "in":
        return column, op, draw(st.lists(values, min_size=1, max_size=3, unique=True))
    return column, op, draw(values)


def expression(clauses: list[list[tuple[str, str, Any]]]) -> pc.Expression:
    """The oracle: a filter in DNF as a pyarrow expression."""
    ors = []
    for clause in clauses:
        ands = []
        for column, op, value in clause:
            field = pc.field(column)
            if op == "=":
                ands.append(field == value)
            elif op == "!=":
                ands.append(field != value)
            elif op == "<":
                ands.append(field < value)
            elif op == ">=":
                ands.append(field >= value)
            else:
                ands.append(field.isin(value))
        term = ands[0]
        for more in ands[1:]:
            term = term & more
        ors.append(term)
    result = ors[0]
    for more in ors[1:]:
        result = result | more
    return result


def matched(rows: pa.Table, expr: pc.Expression) -> pa.Table:
    """Rows where the filter is true (null: not matched)."""
    return rows.filter(expr) if rows.num_rows else rows


def ids(rows: pa.Table) -> list[int]:
    return sorted(rows["id"].to_pylist())


class DeleteModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = tempfile.mkdtemp(prefix="appendtable-delete-model-")
        self.tables = {
            mode: at.create_table(
                f"{self.root}/{mode}",
                SCHEMA,
                partition_by=["p"],
                options={
                    "bucket": "2",
                    "bucket-key": "k",
                    "write-only": "true",
                    "deletion-vectors.enabled": flag,
                    "compaction.min.file-num": "2",
                },
            )
            for mode, flag in MODES.items()
        }
        self.next_id = 0
        self.live = SCHEMA.empty_table()
        self.at: dict[str, dict[int, pa.Table]] = {mode: {} for mode in MODES}
        self.tags: dict[str, pa.Table] = {}
        self.streams: dict[str, at.StreamReader] = {}
        #: every row ever appended (a stream reads rolled-back appends too)
        self.all_rows = SCHEMA.empty_table()
        self.delivered: dict[str, list[int]] = {mode: [] for mode in MODES}
        #: ids a delete removed while a stream had not delivered them (never to be delivered)
        self.gone_for: dict[str, set[int]] = {mode: set() for mode in MODES}
        #: ids some delete's filter matched when committed (their delivery is not required)
        self.matched_ever: set[int] = set()
        self.appended: list[int] = []

    def teardown(self) -> None:
        flush_hints()
        for table in self.tables.values():
            table.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def _record(self) -> None:
        for mode, table in self.tables.items():
            latest = table.latest_snapshot()
            if latest is not None:
                self.at[mode][latest.id] = self.live

    # ---- rules --------------------------------------------------------------------------------

    @rule(
        n=st.integers(1, 12),
        ks=st.lists(st.integers(-4, 4), min_size=12, max_size=12),
        vs=st.lists(st.sampled_from(WORDS), min_size=12, max_size=12),
        p=st.sampled_from(["x", "y"]),
    )
    def append(self, n: int, ks: list[int], vs: list[str | None], p: str) -> None:
        new = pa.table(
            {
                "id": pa.array(range(self.next_id, self.next_id + n), pa.int64()),
                "p": [p] * n,
                "k": pa.array(ks[:n], pa.int64()),
                "v": pa.array(vs[:n], pa.string()),
            },
            schema=SCHEMA,
        )
        self.next_id += n
        self.appended.extend(range(self.next_id - n, self.next_id))
        for table in self.tables.values():
            table.append(new)
        self.live = pa.concat_tables([self.live, new])
        self.all_rows = pa.concat_tables([self.all_rows, new])
        self._record()

    @rule(clauses=st.lists(st.lists(predicates(), min_size=1, max_size=2), min_size=1, max_size=2))
    def delete(self, clauses: list[list[tuple[str, str, Any]]]) -> None:
        expr = expression(clauses)
        hit = matched(self.live, expr)
        self.matched_ever.update(matched(self.all_rows, expr)["id"].to_pylist())
        for mode, table in self.tables.items():
            result = table.delete([list(c) for c in clauses])
            assert result.rows == hit.num_rows, (mode, clauses)
            assert (result.snapshot is None) == (hit.num_rows == 0)
            self.gone_for[mode] |= set(hit["id"].to_pylist()) - set(self.delivered[mode])
        self.live = self.live.filter(pc.invert(pc.is_in(self.live["id"], hit["id"])))
        self._record()

    @rule(full=st.booleans())
    def compact(self, full: bool) -> None:
        for table in self.tables.values():
            table.compact(full=full)
        self._record()

    @rule(keep=st.integers(1, 4))
    def expire(self, keep: int) -> None:
        self.drain()  # a stream behind the earliest snapshot would be expired: keep up
        for mode, table in self.tables.items():
            table.expire_snapshots(retain_min=keep, retain_max=keep, older_than_ms=FOREVER)
            retained = {s.id for s in table.snapshots()}
            self.at[mode] = {i: rows for i, rows in self.at[mode].items() if i in retained}

    @precondition(lambda self: any(len(v) > 1 for v in self.at.values()))
    @rule(data=st.data())
    def rollback(self, data: st.DataObject) -> None:
        # the same logical state in both tables: pick a point both retain
        common = [
            rows
            for i, rows in self.at["dv"].items()
            if any(r is rows for r in self.at["cow"].values())
        ]
        if not common:
            return
        target = data.draw(st.sampled_from(common))
        for mode, table in self.tables.items():
            snapshot_id = max(i for i, rows in self.at[mode].items() if rows is target)
            table.rollback_to(snapshot_id)
        self.live = target
        self._record()

    @rule(name=st.sampled_from(TAGS))
    def tag(self, name: str) -> None:
        for table in self.tables.values():
            if name in table.tags():
                table.delete_tag(name)
            if table.latest_snapshot() is not None:
                table.create_tag(name)
        if self.tables["dv"].latest_snapshot() is not None:
            self.tags[name] = self.live

    @rule()
    def drain(self) -> None:
        for mode, table in self.tables.items():
            if mode not in self.streams and table.latest_snapshot() is not None:
                self.streams[mode] = table.stream(mode="from-snapshot", snapshot_id=1)
        for mode, reader in self.streams.items():
            while (unit := reader.poll()) is not None:
                for batch in reader.read(unit):
                    self.delivered[mode].extend(batch.column("id").to_pylist())

    @rule()
    def purge(self) -> None:
        self.drain()
        for mode, table in self.tables.items():
            result = table.purge(older_than=dt.timedelta(0), tags="delete")
            assert sorted(result.tags_deleted) == sorted(result.tags_holding_deletes)
            for name in result.tags_deleted:
                self.tags.pop(name, None)
            retained = {s.id for s in table.snapshots()}
            self.at[mode] = {i: rows for i, rows in self.at[mode].items() if i in retained}
            if result.snapshot is not None:
                self.at[mode][result.snapshot.id] = self.live
        # tags deleted by one table's purge and not the other's: drop them from both
        for name in list(self.tags):
            if any(name not in t.tags() for t in self.tables.values()):
                self.tags.pop(name)
                for table in self.tables.values():
                    if name in table.tags():
                        table.delete_tag(name)

    # ---- invariants ---------------------------------------------------------------------------

    @invariant()
    def latest_rows(self) -> None:
        for table in self.tables.values():
            if table.latest_snapshot() is None:
                continue
            assert ids(table.scan().to_arrow()) == ids(self.live)
            assert table.scan().count() == self.live.num_rows

    @invariant()
    def time_travel_and_tags(self) -> None:
        for mode, table in self.tables.items():
            for snapshot_id, rows in self.at[mode].items():
                got = table.scan(snapshot_id=snapshot_id).to_arrow()
                assert ids(got) == ids(rows), (mode, snapshot_id)
            for name, rows in self.tags.items():
                assert ids(table.scan(tag=name).to_arrow()) == ids(rows), (mode, name)

    @invariant()
    def stream_delivery(self) -> None:
        for mode in MODES:
            delivered = self.delivered[mode]
            assert len(delivered) == len(set(delivered)), mode
            assert set(delivered) <= set(self.appended), mode
            assert not (set(delivered) & self.gone_for[mode]), mode

    def check_stream_complete(self) -> None:
        self.drain()
        for mode in MODES:
            required = set(self.appended) - self.matched_ever
            assert required <= set(self.delivered[mode]), mode


class CompleteDeleteModel(DeleteModel):
    @invariant()
    def stream_complete(self) -> None:
        self.check_stream_complete()


_SETTINGS = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}
CompleteDeleteModel.TestCase.settings = settings(
    max_examples=12, stateful_step_count=20, **_SETTINGS
)
test_delete_model = CompleteDeleteModel.TestCase


@pytest.mark.slow
def test_delete_model_many_examples() -> None:
    """The same model, longer (the slow tier; longest with APPENDTABLE_LONG_TESTS)."""
    run = CompleteDeleteModel.TestCase()
    run.settings = settings(
        max_examples=scaled(300, 40), stateful_step_count=scaled(50, 30), **_SETTINGS
    )
    run.runTest()
