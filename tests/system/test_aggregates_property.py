"""Property: after any sequence of operations, the ``partitions`` and ``buckets`` system
tables are exactly a pyarrow-compute aggregation of the ``files`` system table, at the latest
snapshot and at every retained one, and their record and file counts are the model's.

``APPENDTABLE_SYSTEM_EXAMPLES`` raises the number of sequences (default 25)."""

from __future__ import annotations

import os
import uuid

import fsspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.system.model import DAYS, Model, check, read_system

EXAMPLES = int(os.environ.get("APPENDTABLE_SYSTEM_EXAMPLES", "25"))

_append = st.tuples(
    st.just("append"),
    st.lists(st.tuples(st.sampled_from(DAYS), st.integers(1, 6)), min_size=1, max_size=3),
)
_operations = st.lists(
    st.one_of(
        _append,
        st.tuples(st.just("compact"), st.none()),
        st.tuples(st.just("overwrite"), st.tuples(st.sampled_from(DAYS[:3]), st.integers(1, 4))),
        st.tuples(st.just("rollback"), st.integers(0, 50)),
        st.tuples(st.just("add_column"), st.none()),
        st.tuples(st.just("expire"), st.integers(1, 4)),
        st.tuples(st.just("tag"), st.integers(0, 50)),
    ),
    min_size=1,
    max_size=12,
)


def _apply(model: Model, operation: str, argument: object) -> None:
    retained = [f.id for f in model.snapshots[model.earliest - 1 :]]
    if operation == "append":
        model.append(argument)  # type: ignore[arg-type]
    elif operation == "compact":
        model.compact()
    elif operation == "overwrite":
        day, count = argument  # type: ignore[misc]
        model.overwrite(day, count)
    elif operation == "rollback" and retained:
        model.rollback(retained[int(argument) % len(retained)])  # type: ignore[call-overload]
    elif operation == "add_column":
        model.add_column(f"c{len(model.schemas)}")
    elif operation == "expire" and retained:
        model.expire(int(argument))  # type: ignore[call-overload]
    elif operation == "tag" and retained:
        model.tag(f"t{len(model.tags)}", retained[int(argument) % len(retained)])  # type: ignore[call-overload]


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(operations=_operations)
def test_partitions_and_buckets_sum_up_the_files(
    operations: list[tuple[str, object]],
) -> None:
    uri = f"memory://appendtable-system/{uuid.uuid4().hex}"
    try:
        model = Model.create(uri)
        for operation, argument in operations:
            _apply(model, operation, argument)
        check(model)  # every system table, at every retained snapshot and tag
        assert read_system(model.table, "partitions")["record_count"].to_pylist() == [
            count for count in _partition_counts(model) if count
        ]
    finally:
        fs = fsspec.filesystem("memory")
        if fs.exists(uri):
            fs.rm(uri, recursive=True)


def _partition_counts(model: Model) -> list[int]:
    """Rows per partition in the order the docs promise: by value, null last."""
    return [sum(1 for day, _ in model.rows if day == value) for value in [*sorted(DAYS[:3]), None]]
