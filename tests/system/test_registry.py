"""The system-table registry: names, schemas known without a table, the errors of a wrong
name or of time travel where there is none, and the rendering of stored values as text."""

from __future__ import annotations

import datetime as dt
import decimal
import math

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import appendtable as at
from appendtable.metadata.types import TypeSpec
from appendtable.system.values import value_texts
from tests.system.model import Model, read_system

NAMES = (
    "snapshots",
    "schemas",
    "options",
    "tags",
    "consumers",
    "files",
    "manifests",
    "partitions",
    "buckets",
)
TIME_TRAVEL = {"files", "manifests", "partitions", "buckets"}
UTC_MS = pa.timestamp("ms", tz="UTC")


def test_the_names_and_what_time_travels() -> None:
    assert at.SYSTEM_TABLE_NAMES == NAMES
    for name in NAMES:
        info = at.system_table_info(name)
        assert info.name == name and info.doc
        assert info.time_travel == (name in TIME_TRAVEL)


@pytest.mark.parametrize("name", NAMES)
def test_schemas_are_typed_and_documented_without_a_table(name: str) -> None:
    schema = at.system_table_schema(name)
    assert schema.equals(at.system_table_info(name).schema)
    assert len(set(schema.names)) == len(schema.names)
    for field in schema:
        assert field.metadata[b"doc"], (name, field.name)
        if field.name.endswith("_time") or field.name == "watermark":
            assert field.type == UTC_MS, (name, field.name)
        if field.name.endswith("_id") and field.name != "consumer_id":
            assert field.type == pa.int64(), (name, field.name)
        if field.name.endswith(("_count", "_size", "_in_bytes", "_number")):
            assert field.type == pa.int64(), (name, field.name)


def test_an_unknown_name_suggests_the_closest_and_lists_them(tmp_path: object) -> None:
    table = Model.create(f"{tmp_path}/t").table
    for wrong, closest in (
        ("snapshot", "snapshots"),
        ("$files", "files"),
        ("Partitions", "partitions"),
    ):
        for call in (at.system_table_schema, at.system_table_info, table.system_table):
            with pytest.raises(at.InvalidArgumentError) as caught:
                call(wrong)
            message = str(caught.value)
            assert f"did you mean '{closest}'" in message
            assert ", ".join(NAMES) in message
    for wrong in ("", "nothing-like-it"):
        with pytest.raises(at.InvalidArgumentError, match="system tables: snapshots, schemas"):
            table.system_table(wrong)
    for not_text in (None, 3, ["files"]):
        with pytest.raises(at.InvalidArgumentError, match="unknown system table"):
            table.system_table(not_text)  # type: ignore[arg-type]


def test_time_travel_only_where_it_makes_sense(tmp_path: object) -> None:
    model = Model.create(f"{tmp_path}/t")
    model.append([("mon", 2)])
    model.tag("v1")
    model.append([("tue", 3)])
    table = model.table
    for name in sorted(set(NAMES) - TIME_TRAVEL):
        for keyword, value in (("snapshot_id", 1), ("tag", "v1"), ("timestamp_ms", 0)):
            with pytest.raises(at.InvalidArgumentError, match=f"{keyword} applies only to files"):
                table.system_table(name, **{keyword: value})  # type: ignore[arg-type]
    with pytest.raises(at.InvalidArgumentError, match="not both"):
        table.system_table("files", snapshot_id=1, tag="v1")
    with pytest.raises(at.InvalidArgumentError):
        table.system_table("files", snapshot_id="one")  # type: ignore[arg-type]
    with pytest.raises(at.TagNotFoundError, match="v2"):
        table.system_table("buckets", tag="v2")
    with pytest.raises(at.SnapshotNotFoundError):
        table.system_table("manifests", snapshot_id=9)
    assert read_system(table, "partitions", snapshot_id=1)["record_count"].to_pylist() == [2]
    assert read_system(table, "partitions", tag="v1")["record_count"].to_pylist() == [2]
    assert sorted(read_system(table, "partitions")["record_count"].to_pylist()) == [2, 3]


# ---- stored values as text ----------------------------------------------------------------------

_EPOCH = dt.datetime(1970, 1, 1)
_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


def _timestamp_text(value: int, unit: str, zoned: bool) -> str:
    """Written out with Python's datetime: fraction digits by unit, 'Z' for instants."""
    seconds, fraction = divmod(value, _PER_SECOND[unit])
    try:
        moment = _EPOCH + dt.timedelta(seconds=seconds)
    except OverflowError:
        return str(value)
    if not 1 <= moment.year <= 9999:
        return str(value)
    digits = {"s": 0, "ms": 3, "us": 6, "ns": 9}[unit]
    text = moment.strftime("%Y-%m-%d %H:%M:%S").rjust(19, "0")
    if digits:
        text += "." + str(fraction).rjust(digits, "0")
    return text + ("Z" if zoned else "")


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)), max_size=20),
    unit=st.sampled_from(["s", "ms", "us", "ns"]),
    zoned=st.booleans(),
)
def test_timestamps_as_text(values: list[int | None], unit: str, zoned: bool) -> None:
    spec = TypeSpec(kind="timestamp", unit=unit, tz="Europe/Paris" if zoned else None)
    expected = [None if v is None else _timestamp_text(v, unit, zoned) for v in values]
    assert value_texts(values, spec).to_pylist() == expected


@settings(max_examples=300, deadline=None)
@given(values=st.lists(st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1)), max_size=20))
def test_dates_as_text(values: list[int | None]) -> None:
    def text(days: int) -> str:
        try:
            day = dt.date(1970, 1, 1) + dt.timedelta(days=days)
        except OverflowError:
            return str(days)
        return day.isoformat().rjust(10, "0")

    expected = [None if v is None else text(v) for v in values]
    assert value_texts(values, TypeSpec(kind="date32")).to_pylist() == expected


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.one_of(st.none(), st.floats(allow_nan=False)), max_size=20),
    ints=st.lists(st.one_of(st.none(), st.integers(0, 2**64 - 1)), max_size=20),
    blobs=st.lists(st.one_of(st.none(), st.binary(max_size=8)), max_size=20),
    texts=st.lists(st.one_of(st.none(), st.text(max_size=8)), max_size=20),
)
def test_numbers_binaries_and_strings_as_text(
    values: list[float | None],
    ints: list[int | None],
    blobs: list[bytes | None],
    texts: list[str | None],
) -> None:
    rendered = value_texts(values, TypeSpec(kind="float64")).to_pylist()
    for value, text in zip(values, rendered, strict=True):
        assert (text is None) == (value is None)
        if value is not None:
            assert text is not None and float(text) == value
            assert math.copysign(1, float(text)) == math.copysign(1, value)
    unsigned = value_texts(ints, TypeSpec(kind="uint64")).to_pylist()
    assert unsigned == [None if v is None else str(v) for v in ints]
    assert value_texts(blobs, TypeSpec(kind="binary")).to_pylist() == [
        None if b is None else "0x" + b.hex() for b in blobs
    ]
    assert value_texts(texts, TypeSpec(kind="string")).to_pylist() == texts


def test_other_kinds_as_text() -> None:
    assert value_texts([True, False, None], TypeSpec(kind="bool")).to_pylist() == [
        "true",
        "false",
        None,
    ]
    exact = str(decimal.Decimal("-12.50"))
    assert value_texts([exact], TypeSpec(kind="decimal", precision=5, scale=2)).to_pylist() == [
        "-12.50"
    ]
    assert value_texts([3_723_004], TypeSpec(kind="time32", unit="ms")).to_pylist() == [
        "01:02:03.004"
    ]
    assert value_texts([None, 1], TypeSpec(kind="list")).to_pylist() == [None, None]
