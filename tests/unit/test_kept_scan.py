"""``kept_scan``: a dataset scan of several files without their deleted rows, in order, each
file's deleted positions applied to its own rows whatever the batches the scanner cuts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from appendtable.datafiles.kept_scan import RowCountMismatch, scan_kept

SCHEMA = pa.schema([("n", pa.int64()), ("s", pa.string())])


def _write(directory: Path, sizes: list[int], group: int) -> tuple[list[str], list[pa.Table]]:
    paths, tables = [], []
    first = 0
    for index, size in enumerate(sizes):
        numbers = np.arange(first, first + size, dtype=np.int64)
        table = pa.table({"n": numbers, "s": [f"v{n}" for n in numbers]}, schema=SCHEMA)
        path = str(directory / f"{index}.parquet")
        pq.write_table(table, path, row_group_size=group)
        paths.append(path)
        tables.append(table)
        first += size
    return paths, tables


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    sizes=st.lists(st.integers(0, 3000), min_size=1, max_size=6),
    group=st.integers(1, 1000),
    deleted=st.floats(0, 1),
    columns=st.sampled_from([None, ["s"], ["s", "n"], []]),
    seed=st.integers(0, 2**32 - 1),
)
def test_every_file_loses_exactly_its_masked_rows_in_order(
    tmp_path_factory: pytest.TempPathFactory,
    sizes: list[int],
    group: int,
    deleted: float,
    columns: list[str] | None,
    seed: int,
) -> None:
    directory = tmp_path_factory.mktemp("files")
    paths, tables = _write(directory, sizes, group)
    rng = np.random.default_rng(seed)
    masks = [rng.random(t.num_rows) >= deleted if rng.random() < 0.8 else None for t in tables]
    wanted = SCHEMA if columns is None else pa.schema([SCHEMA.field(c) for c in columns])
    deleted = [None if m is None else np.flatnonzero(~m).astype(np.uint64) for m in masks]
    result = scan_kept(
        ds.dataset(paths, schema=SCHEMA, format="parquet"),
        columns,
        dict(zip(paths, deleted, strict=True)),
        {p: t.num_rows for p, t in zip(paths, tables, strict=True)},
        wanted,
    )
    expected = pa.concat_tables(
        [t if m is None else t.filter(pa.array(m)) for t, m in zip(tables, masks, strict=True)]
    ).select(wanted.names)
    assert result.schema == wanted
    assert result.num_rows == expected.num_rows
    assert result.equals(expected)


@pytest.mark.parametrize("claimed", [99, 101])
def test_a_file_of_other_than_its_rows_is_named(tmp_path: Path, claimed: int) -> None:
    paths, _ = _write(tmp_path, [100, 50], 30)
    deleted = {paths[0]: np.array([0, claimed - 1], dtype=np.uint64), paths[1]: None}
    with pytest.raises(RowCountMismatch) as caught:
        scan_kept(
            ds.dataset(paths, schema=SCHEMA, format="parquet"),
            None,
            deleted,
            {paths[0]: claimed, paths[1]: 50},
            SCHEMA,
        )
    assert (caught.value.path, caught.value.read, caught.value.written) == (
        paths[0],
        100,
        claimed,
    )
