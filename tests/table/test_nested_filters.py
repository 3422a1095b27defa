"""Filters on struct fields: ``("payload.x", "=", 1)`` or ``(("payload", "x"), "=", 1)`` in
scans and streams, exact whatever the files record, pruned by the struct-field statistics new
files carry (by field id, through renames, added fields and widenings), never pruned (but still
exact) on files without them. Results are checked against a model evaluated on Python rows."""

from __future__ import annotations

import datetime as dt
import decimal
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import appendtable as at
from appendtable.commit.snapshots import flush_hints
from appendtable.schema_update import column_path

INNER = pa.struct([("d", pa.date32()), ("f", pa.float64())])
PAYLOAD = pa.struct(
    [("x", pa.int16()), ("s", pa.string()), ("m", pa.decimal128(38, 10)), ("inner", INNER)]
)
SCHEMA = pa.schema([("k", pa.int64()), ("payload", PAYLOAD), ("payload.x", pa.int32())])
GOLDEN = Path(__file__).resolve().parents[1] / "golden"


# ---- the model ----------------------------------------------------------------------------


def _get(row: dict[str, Any], path: Sequence[str]) -> Any:
    value: Any = row[path[0]]
    for name in path[1:]:
        if value is None:
            return None
        value = value[name]
    return value


def _holds(value: Any, op: str, operand: Any) -> bool:
    """SQL semantics: a null satisfies only ``is null``."""
    if op == "is null":
        return value is None
    if op == "is not null":
        return value is not None
    if value is None:
        return False
    if op == "in":
        return any(value == v for v in operand)
    if op == "not in":
        return all(value != v for v in operand)
    compare = {
        "=": value == operand,
        "!=": value != operand,
        "<": value < operand,
        "<=": value <= operand,
        ">": value > operand,
        ">=": value >= operand,
    }
    return bool(compare[op])


def _expected(
    rows: list[dict[str, Any]], clauses: list[list[tuple[tuple[str, ...], str, Any]]]
) -> list[int]:
    return sorted(
        row["k"]
        for row in rows
        if any(all(_holds(_get(row, p), op, v) for p, op, v in clause) for clause in clauses)
    )


def _keys(scan: at.Scan) -> list[int]:
    return sorted(scan.to_arrow().column("k").to_pylist())


def _units(stream: at.StreamReader) -> list[at.StreamUnit]:
    """Every unit the stream has now."""
    units = []
    while (unit := stream.poll()) is not None:
        units.append(unit)
    return units


def _unit_keys(stream: at.StreamReader, unit: at.StreamUnit) -> list[int]:
    return [k for batch in stream.read(unit) for k in batch.column("k").to_pylist()]


# ---- generated data -----------------------------------------------------------------------

_INT16 = st.one_of(st.integers(-(2**15), 2**15 - 1), st.sampled_from([-(2**15), 0, 2**15 - 1]))
_TEXT = st.one_of(
    st.text(max_size=3),
    st.text(alphabet="aé\U0001f600z", min_size=15, max_size=40),  # beyond the stats truncation
)
_EXACT = decimal.Context(prec=60)  # never the default 28 digits: the values have 38
_DECIMAL = st.integers(-(10**38) + 1, 10**38 - 1).map(
    lambda n: decimal.Decimal(n).scaleb(-10, context=_EXACT)
)
_DATE = st.dates(dt.date(1, 1, 1), dt.date(9999, 12, 31))
_FLOAT = st.one_of(
    st.floats(allow_nan=False, width=64),
    st.sampled_from([0.0, -0.0, 5e-324, -1.7976931348623157e308]),
)


def _maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), strategy)


_LEAVES: dict[tuple[str, ...], st.SearchStrategy[Any]] = {
    ("payload", "x"): _INT16,
    ("payload", "s"): _TEXT,
    ("payload", "m"): _DECIMAL,
    ("payload", "inner", "d"): _DATE,
    ("payload", "inner", "f"): _FLOAT,
    ("payload.x",): st.integers(-(2**31), 2**31 - 1),
}
Pools = dict[tuple[str, ...], list[Any]]


@st.composite
def _pools(draw: st.DrawFn) -> Pools:
    """A few values per leaf, from the whole domain of its type: rows draw from them, so
    files share values, filters match rows, and files prune."""
    return {
        path: draw(st.lists(values, min_size=1, max_size=4)) for path, values in _LEAVES.items()
    }


def _pick(pools: Pools, path: tuple[str, ...]) -> st.SearchStrategy[Any]:
    return _maybe(st.sampled_from(pools[path]))


def _row(pools: Pools) -> st.SearchStrategy[dict[str, Any]]:
    inner = st.fixed_dictionaries(
        {"d": _pick(pools, ("payload", "inner", "d")), "f": _pick(pools, ("payload", "inner", "f"))}
    )
    payload = st.fixed_dictionaries(
        {
            "x": _pick(pools, ("payload", "x")),
            "s": _pick(pools, ("payload", "s")),
            "m": _pick(pools, ("payload", "m")),
            "inner": _maybe(inner),
        }
    )
    return st.fixed_dictionaries(
        {"payload": _maybe(payload), "payload.x": _pick(pools, ("payload.x",))}
    )


@st.composite
def _term(draw: st.DrawFn, pools: Pools) -> tuple[tuple[str, ...], str, Any]:
    path = draw(st.sampled_from(sorted(_LEAVES)))
    op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">=", "in", "not in", "is null"]))
    value_of = st.one_of(st.sampled_from(pools[path]), _LEAVES[path])
    if op in ("in", "not in"):
        return path, op, draw(st.lists(value_of, max_size=3))
    if op == "is null":
        return path, draw(st.sampled_from(["is null", "is not null"])), None
    return path, op, draw(value_of)


def _spelled(path: tuple[str, ...], as_tuple: bool) -> str | tuple[str, ...]:
    """A path as the filter takes it: a tuple, or a dotted string where that names it (the
    struct field payload.x cannot be: the string names the top-level column of that name)."""
    dotted = ".".join(path)
    if as_tuple or (len(path) > 1 and dotted in SCHEMA.names):
        return path
    return dotted


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_struct_field_filters_match_the_model(data: st.DataObject) -> None:
    pools = data.draw(_pools())
    files = data.draw(
        st.lists(st.lists(_row(pools), min_size=1, max_size=8), min_size=1, max_size=5)
    )
    mode = data.draw(st.sampled_from(["truncate(16)", "full", "counts", "none"]))
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as root:
        table = at.create_table(
            f"{root}/t", SCHEMA, options={"metadata.stats-mode": mode, "write-only": True}
        )
        for chunk in files:
            batch = [{"k": len(rows) + i, **row} for i, row in enumerate(chunk)]
            rows.extend(batch)
            table.append(pa.Table.from_pylist(batch, schema=SCHEMA))
        clauses = data.draw(
            st.lists(st.lists(_term(pools), min_size=1, max_size=3), min_size=1, max_size=2)
        )
        as_tuple = data.draw(st.booleans())
        spelled = [
            [
                (_spelled(p, as_tuple), op, v)
                if op not in ("is null", "is not null")
                else (_spelled(p, as_tuple), op)
                for p, op, v in clause
            ]
            for clause in clauses
        ]
        scan = table.scan(filter=spelled)
        assert _keys(scan) == _expected(rows, clauses), spelled
        assert scan.count() == len(_expected(rows, clauses))
        streamed = table.stream(mode="from-snapshot-full", snapshot_id=1, filter=spelled)
        got = [k for unit in _units(streamed) for k in _unit_keys(streamed, unit)]
        assert sorted(got) == _expected(rows, clauses), spelled
        flush_hints()  # a LATEST hint written in the background would race the removal


# ---- pruning --------------------------------------------------------------------------------


CLUSTERED = pa.schema([("k", pa.int64()), ("payload", PAYLOAD)])


def _event(k: int, x: int | None, s: str = "s") -> dict[str, Any]:
    return {"k": k, "payload": None if x is None else {"x": x, "s": s, "m": None, "inner": None}}


def _files_read(scan: at.Scan) -> int:
    return sum(len(split.files) for split in scan.plan())


@pytest.fixture
def clustered(tmp_path: Path) -> at.Table:
    """Four files whose payload.x ranges do not overlap: 0-9, 10-19, 20-29, 30-39 (and a
    null payload in each)."""
    table = at.create_table(str(tmp_path / "t"), CLUSTERED, options={"write-only": True})
    for start in range(0, 40, 10):
        events = [_event(start + i, start + i) for i in range(10)] + [_event(100 + start, None)]
        table.append(pa.Table.from_pylist(events, schema=CLUSTERED))
    return table


def test_struct_field_statistics_prune_files(clustered: at.Table) -> None:
    assert _files_read(clustered.scan()) == 4
    one = clustered.scan(filter=[("payload.x", "=", 21)])
    assert _files_read(one) == 1 and _keys(one) == [21]
    assert _files_read(clustered.scan(filter=[(("payload", "x"), ">=", 30)])) == 1
    assert _files_read(clustered.scan(filter=[("payload.x", ">", 99)])) == 0
    # a null payload makes its fields null: every file holds one
    assert _keys(clustered.scan(filter=[("payload.x", "is null")])) == [100, 110, 120, 130]
    # streams prune the same way
    stream = clustered.stream(
        mode="from-snapshot-full", snapshot_id=1, filter=[("payload.x", "in", [5, 35])]
    )
    units = _units(stream)
    assert sum(u.file_count for u in units) == 2
    assert sorted(k for u in units for k in _unit_keys(stream, u)) == [5, 35]


def test_a_top_level_column_with_a_dotted_name_stays_addressable(tmp_path: Path) -> None:
    """``payload.x`` names the top-level column of that name; the struct field is reached
    with the tuple ``("payload", "x")``. Each prunes with its own statistics."""
    table = at.create_table(str(tmp_path / "t"), SCHEMA, options={"write-only": True})
    for start in range(0, 40, 10):
        events = [{**_event(start + i, start + i), "payload.x": -(start + i)} for i in range(10)]
        table.append(pa.Table.from_pylist(events, schema=SCHEMA))
    top = table.scan(filter=[("payload.x", "=", -21)])
    assert _files_read(top) == 1 and _keys(top) == [21]
    assert _keys(table.scan(filter=[(("payload.x",), "<", -35)])) == [36, 37, 38, 39]
    field = table.scan(filter=[(("payload", "x"), "=", 21)])
    assert _files_read(field) == 1 and _keys(field) == [21]
    assert _keys(table.scan(filter=[("payload.x", ">=", 0)])) == [0]
    assert _keys(table.scan(filter=[(("payload", "x"), ">=", 38)])) == [38, 39]
    # update_schema() resolves the same string the same way: the top-level column
    with table.update_schema() as update:
        update.rename_column("payload.x", "flat")
    assert _keys(table.scan(filter=[("flat", "=", -3)])) == [3]
    assert _keys(table.scan(filter=[("payload.x", "=", 3)])) == [3]  # now the struct field


def test_statistics_follow_renames_widenings_and_added_fields(clustered: at.Table) -> None:
    with clustered.update_schema() as update:
        update.rename_column("payload.x", "id")
        update.update_column("payload.id", type=pa.int32())
        update.add_column("payload.late", pa.string())
    later = pa.Table.from_pylist(
        [{"k": 500, "payload": {"id": 70000, "s": "s", "late": "yes"}}],
        schema=clustered.schema,
    )
    clustered.append(later)
    wide = clustered.scan(filter=[("payload.id", ">", 2**15)])
    assert _files_read(wide) == 1 and _keys(wide) == [500]
    renamed = clustered.scan(filter=[("payload.id", "=", 12)])
    assert _files_read(renamed) == 1 and _keys(renamed) == [12]
    # files written before payload.late existed read it as null: pruned for a value
    late = clustered.scan(filter=[("payload.late", "=", "yes")])
    assert _files_read(late) == 1 and _keys(late) == [500]
    assert len(_keys(clustered.scan(filter=[("payload.late", "is null")]))) == 44
    with pytest.raises(at.InvalidFilterError, match=r"unknown field 'x' of struct 'payload'"):
        clustered.scan(filter=[(("payload", "x"), "=", 1)])
    # time travel reads the old names
    old = clustered.scan(snapshot_id=2, filter=[("payload.x", "=", 12)])
    assert _keys(old) == [12]


def test_files_without_struct_statistics_are_read_and_filtered_exactly(tmp_path: Path) -> None:
    """A file adopted from another engine records no struct-field statistics (and a golden
    table's files predate them): never pruned on a struct field, still exact."""
    table = at.create_table(str(tmp_path / "t"), CLUSTERED)
    with table.staging_area() as area:
        events = [_event(i, i) for i in range(5)]
        pq.write_table(
            pa.Table.from_pylist(events, schema=CLUSTERED), f"{area.uri}/foreign.parquet"
        )
        table.committer().commit(area.adopt(["foreign.parquet"]))
    assert len(table.files()) == 1
    scan = table.scan(filter=[("payload.x", ">", 99)])
    assert _files_read(scan) == 1 and _keys(scan) == []
    assert _keys(table.scan(filter=[("payload.x", ">=", 3)])) == [3, 4]


def test_a_golden_table_filters_on_struct_fields(tmp_path: Path) -> None:
    shutil.copytree(GOLDEN / "format-v2-evolved", tmp_path / "g")
    table = at.open_table(str(tmp_path / "g"))
    rows = table.scan().to_arrow().to_pylist()
    expected = sorted(
        r["user_id"]
        for r in rows
        if r["payload"] and r["payload"]["x"] is not None and r["payload"]["x"] >= 5
    )
    got = table.scan(filter=[("payload.x", ">=", 5)]).to_arrow().column("user_id").to_pylist()
    assert 0 < len(got) < len(rows)
    assert sorted(got) == expected
    # a file written now carries the statistics; the golden ones are still read
    table.append(
        pa.Table.from_pylist(
            [{"day": dt.date(2026, 2, 3), "user_id": 10**6, "payload": {"x": 10**9}}],
            schema=table.schema,
        )
    )
    top = table.scan(filter=[("payload.x", ">", 10**8)])
    assert top.to_arrow().column("user_id").to_pylist() == [10**6]


# ---- naming ---------------------------------------------------------------------------------


def test_dotted_names_resolve_as_update_schema_resolves_them(clustered: at.Table) -> None:
    """The rule: a string that is a top-level column's name is that column; any other dotted
    string is a path; a tuple is a path taken as given."""
    schema = clustered._state.schema
    for spelled, expected in [
        ("payload.x", ("payload", "x")),
        ("payload.s", ("payload", "s")),
        ("payload.inner.d", ("payload", "inner", "d")),
        ("k", ("k",)),
    ]:
        assert column_path(spelled, schema) == expected
        predicate = clustered.scan(filter=[(spelled, "is null")]).filter
        assert predicate is not None
        (term,) = predicate.clauses[0]
        assert (term.column, *term.path) == expected
    assert repr(clustered.scan(filter=[("payload.inner.d", "is null")])).count(
        "payload.inner.d is null"
    )


@pytest.mark.parametrize(
    ("term", "message"),
    [
        (("payload.nope", "=", 1), r"unknown field 'nope' of struct 'payload'"),
        (("nope.x", "=", 1), r"unknown column 'nope\.x'"),
        (("k.x", "=", 1), r"'k' is a int64, not a struct"),
        ((("payload", ""), "=", 1), r"unknown column"),
        (("payload.s", "=", 1), r"does not fit column 'payload\.s' of type string"),
        (("payload", "=", 1), r"does not fit column 'payload' of type struct"),
        (("payload.inner", ">", 1), r"does not fit column 'payload\.inner'"),
    ],
)
def test_bad_struct_field_filters_name_the_problem(
    clustered: at.Table, term: tuple[Any, ...], message: str
) -> None:
    with pytest.raises(at.InvalidFilterError, match=message):
        clustered.scan(filter=[term])


def test_a_path_through_a_list_is_refused(tmp_path: Path) -> None:
    schema = pa.schema([("k", pa.int64()), ("items", pa.list_(pa.struct([("v", pa.int8())])))])
    table = at.create_table(str(tmp_path / "t"), schema)
    with pytest.raises(at.InvalidFilterError, match=r"'items' is a list, not a struct"):
        table.scan(filter=[("items.v", "=", 1)])


def test_path_terms_in_flat_nested_and_json_forms(clustered: at.Table) -> None:
    for form, expected in [
        ([(("payload", "x"), "=", 3)], [3]),
        ([[("payload", "x"), "=", 3]], [3]),  # a flat filter that went through JSON
        ([[(("payload", "x"), "=", 3)], [("k", "=", 13)]], [3, 13]),
        ([[[["payload", "x"], "=", 3]], [["k", "=", 13]]], [3, 13]),
        ([(("payload", "x"), "is null")], [100, 110, 120, 130]),
        ([[(("payload", "x"), "is null")]], [100, 110, 120, 130]),
        ([(("payload", "x"), ">", 35), ("k", "<", 38)], [36, 37]),
    ]:
        assert _keys(clustered.scan(filter=form)) == expected, form


def test_engines_get_the_same_rows(clustered: at.Table) -> None:
    scan = clustered.scan(filter=[("payload.x", "in", [1, 22])], columns=["k"])
    assert scan.count() == 2
    assert sorted(scan.to_duckdb().fetchall()) == [(1,), (22,)]
    assert sorted(pa.table(scan).column("k").to_pylist()) == [1, 22]
    with pytest.raises(at.InvalidFilterError, match="payload"):
        scan.to_dataset()
