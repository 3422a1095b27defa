"""The pure schema-change planner (``planning.schema_changes``): random change lists either apply
whole, with ids that are unique, stable and never reused, or raise a named refusal."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from appendtable.datafiles.arrow_schema import field_specs
from appendtable.errors import InvalidOptionError, SchemaChangeError
from appendtable.metadata.models import TableSchema
from appendtable.metadata.types import FieldSpec
from appendtable.planning.schema_changes import (
    AddColumn,
    DropColumn,
    MoveColumn,
    RenameColumn,
    SchemaChange,
    SetOptions,
    UnsetOptions,
    UpdateColumn,
    apply_changes,
    fields_by_id,
    merge_changes,
    with_field_ids,
)

BASE = with_field_ids(
    TableSchema(
        id=0,
        fields=field_specs(
            pa.schema(
                [
                    ("p", pa.string()),
                    ("k", pa.int32()),
                    ("a", pa.int16()),
                    ("b", pa.float32()),
                    ("s", pa.struct([("x", pa.int8()), ("y", pa.string())])),
                ]
            )
        ),
        partition_keys=("p",),
        options={"bucket": "2", "bucket-key": "k"},
        time_ms=0,
    )
)
NAMES = ["p", "k", "a", "b", "s", "s.x", "s.y", "n1", "n2", "s.n3"]
TYPES = [pa.int8(), pa.int32(), pa.int64(), pa.float64(), pa.string(), pa.large_string()]


def _spec(dtype: pa.DataType) -> FieldSpec:
    return field_specs(pa.schema([("f", dtype)]))[0]


def _path(name: str) -> tuple[str, ...]:
    return tuple(name.split("."))


change = st.one_of(
    st.builds(
        lambda n, t: AddColumn(
            parent=_path(n)[:-1], field=FieldSpec(name=_path(n)[-1], type=_spec(t).type)
        ),
        st.sampled_from(NAMES),
        st.sampled_from(TYPES),
    ),
    st.builds(
        lambda n, m: RenameColumn(path=_path(n), new_name=m),
        st.sampled_from(NAMES),
        st.sampled_from(["r1", "r2", "a", "x"]),
    ),
    st.builds(lambda n: DropColumn(path=_path(n)), st.sampled_from(NAMES)),
    st.builds(
        lambda n, t: UpdateColumn(path=_path(n), type=_spec(t).type),
        st.sampled_from(NAMES),
        st.sampled_from(TYPES),
    ),
    st.builds(lambda n: MoveColumn(path=_path(n), first=True), st.sampled_from(NAMES)),
    st.builds(
        lambda k, v: SetOptions(options={k: v}),
        st.sampled_from(["target-file-size", "bucket", "snapshot.num-retained.min"]),
        st.sampled_from(["3", "64mb", "x"]),
    ),
    st.builds(lambda k: UnsetOptions(keys=(k,)), st.sampled_from(["bucket", "write-only"])),
)


def _ids_by_path(fields: tuple[FieldSpec, ...], prefix: str = "") -> dict[int, str]:
    found: dict[int, str] = {}
    for field in fields:
        assert field.id is not None
        found[field.id] = prefix + field.name
        found.update(_ids_by_path(field.type.fields, f"{prefix}{field.name}."))
    return found


@settings(max_examples=500, deadline=None)
@given(changes=st.lists(change, max_size=6))
def test_changes_apply_whole_with_stable_unique_ids_or_are_refused(
    changes: list[SchemaChange],
) -> None:
    try:
        result = apply_changes(BASE, changes, new_id=1, first_free_field_id=50, time_ms=1)
    except (SchemaChangeError, InvalidOptionError) as exc:
        assert str(exc)
        if isinstance(exc, SchemaChangeError):
            assert exc.column is None or exc.column
        return
    schema = result.schema
    all_ids = list(_ids_by_path(schema.fields))
    assert sorted(all_ids) == sorted(fields_by_id(schema.fields))
    assert len(all_ids) == len(set(all_ids))
    assert schema.highest_field_id >= max(all_ids)
    before = set(_ids_by_path(BASE.fields))
    new = [i for i in all_ids if i not in before]
    assert all(i >= 50 for i in new)  # never an id another schema may have used
    # The layout never changes: partition key and bucket key keep id, name and type.
    assert schema.partition_keys == ("p",)
    assert schema.options["bucket"] == "2"
    key = next(f for f in schema.fields if f.id == 2)
    assert key.type.kind == "int32" and schema.options["bucket-key"] == key.name
    assert next(f for f in schema.fields if f.id == 1).name == "p"


def test_merge_changes_add_only_what_the_data_has_more() -> None:
    data = field_specs(
        pa.schema(
            [
                ("k", pa.int64()),  # wider: left to the write's cast, never widened
                ("s", pa.struct([("x", pa.int8()), ("z", pa.bool_())])),
                ("extra", pa.string()),
            ]
        )
    )
    changes = merge_changes(BASE.fields, data)
    result = apply_changes(BASE, changes, new_id=1, first_free_field_id=50, time_ms=1).schema
    assert [f.name for f in result.fields] == ["p", "k", "a", "b", "s", "extra"]
    struct = next(f for f in result.fields if f.name == "s")
    assert [c.name for c in struct.type.fields] == ["x", "y", "z"]
    assert all(f.nullable for f in result.fields if f.name == "extra")
    assert next(f for f in result.fields if f.name == "k").type.kind == "int32"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ([DropColumn(path=("p",))], "partition column"),
        ([UpdateColumn(path=("k",), type=_spec(pa.int64()).type)], "bucket-key"),
        ([DropColumn(path=("s", "x")), DropColumn(path=("s", "y"))], "only field"),
        ([RenameColumn(path=("a",), new_name="b")], "taken"),
        (
            [AddColumn(parent=("a",), field=FieldSpec(name="z", type=_spec(pa.int8()).type))],
            "not a struct",
        ),
        ([MoveColumn(path=("a",), after="nope")], "nope"),
    ],
)
def test_refusals_name_the_reason(changes: list[SchemaChange], message: str) -> None:
    with pytest.raises(SchemaChangeError, match=message):
        apply_changes(BASE, changes, new_id=1, first_free_field_id=50, time_ms=1)
