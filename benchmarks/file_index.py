"""Point lookups on a column that is neither partition nor bucket key.

One table history of ``index_files`` one-file appends of ``ROWS_PER_FILE`` rows (random ~10
character strings in ``text``: about one distinct value per row, and every file's min/max
spans nearly the whole alphabet, so statistics skip nothing) is written four ways with the same
rows: appendtable without an index, with the bloom filters' bitsets copied into the manifest,
with them probed in the data files (the default 500 B threshold), and as plain Parquet files
(once without and once with Parquet's own bloom filters, written by pyarrow and read by
DuckDB). Each lookup asks for a
different existing value and checks the rows it gets.

Write cost: one append of ``peer_rows`` rows with and without the index on ``text``, and
pyarrow's ``write_table`` with and without its Parquet bloom filter on the same column."""

from __future__ import annotations

import os
from collections.abc import Callable

import duckdb
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

import appendtable as at
from appendtable.storage.base import is_temp_name
from benchmarks.data import make_table
from benchmarks.harness import Case, Result, cycle_setup, measure, sync_then
from benchmarks.rows import count_row, speed_row
from benchmarks.workspace import Workspace

__all__ = ["bench_file_index"]

GROUP = "file-index"
ROWS_PER_FILE = 1_000
_BASE = {"write-only": "true", "commit.fsync": "false"}
_INDEX = {"file-index.bloom-filter.columns": "text"}
_EMBEDDED = {**_INDEX, "file-index.in-manifest-threshold": "1 MB"}
_PARQUET_BLOOM = {"text": {"ndv": ROWS_PER_FILE, "fpp": 0.01}}


def _files(scan: at.Scan) -> int:
    return sum(len(split.files) for split in scan.plan())


def _build(ws: Workspace, files: int) -> tuple[dict[str, str], list[str], dict[str, int]]:
    """The four layouts (name -> uri or directory), the looked-up values and their row counts."""
    data = make_table(files * ROWS_PER_FILE, seed=7)
    layouts = {
        "none": ws.fresh_path("no-index"),
        "manifest": ws.fresh_path("index-in-manifest"),
        "in-file": ws.fresh_path("index-in-file"),
        "parquet": ws.fresh_path("parquet"),
        "parquet-bloom": ws.fresh_path("parquet-bloom"),
    }
    tables = {
        name: at.create_table(layouts[name], data.schema, options={**_BASE, **extra})
        for name, extra in (("none", {}), ("manifest", _EMBEDDED), ("in-file", _INDEX))
    }
    for directory in (layouts["parquet"], layouts["parquet-bloom"]):
        os.makedirs(directory)
    for index in range(files):
        chunk = data.slice(index * ROWS_PER_FILE, ROWS_PER_FILE)
        for table in tables.values():
            table.append(chunk)
        pq.write_table(chunk, f"{layouts['parquet']}/part-{index:05d}.parquet", compression="zstd")
        pq.write_table(
            chunk,
            f"{layouts['parquet-bloom']}/part-{index:05d}.parquet",
            compression="zstd",
            bloom_filter_options=_PARQUET_BLOOM,
        )
    step = max(1, data.num_rows // 37)
    values = [data["text"][i].as_py() for i in range(step // 2, data.num_rows, step)]
    counts = {v: pc.sum(pc.equal(data["text"], v)).as_py() for v in values}
    return layouts, values, counts


def bench_file_index(ws: Workspace) -> list[Result]:
    layouts, values, counts = _build(ws, ws.config.index_files)
    handles = {name: at.open_table(layouts[name]) for name in ("none", "manifest", "in-file")}
    total = _files(handles["none"].scan())
    opened = {
        name: [_files(handles[name].scan(filter=[("text", "=", v)])) for v in values]
        for name in ("manifest", "in-file")
    }
    connection = duckdb.connect()

    def ours(name: str) -> Callable[[str], tuple[str, int]]:
        table = handles[name]
        return lambda v: (v, table.scan(filter=[("text", "=", v)]).to_arrow().num_rows)

    def parquet(v: str) -> tuple[str, int]:
        dataset = ds.dataset(layouts["parquet"], format="parquet")
        return v, dataset.to_table(filter=pc.field("text") == v).num_rows

    def duck(name: str) -> Callable[[str], tuple[str, int]]:
        glob = f"{layouts[name]}/*.parquet"
        query = f"SELECT count(*) FROM read_parquet('{glob}') WHERE text = ?"

        def run(v: str) -> tuple[str, int]:
            row = connection.execute(query, [v]).fetchone()
            return v, int(row[0]) if row is not None else 0

        return run

    def check(name: str, returned: object) -> None:
        assert isinstance(returned, tuple)
        value, rows = returned
        assert counts[value] == rows, (name, value, rows)

    lookups = measure(
        [
            Case("manifest", run=ours("manifest"), setup=cycle_setup(values)),
            Case("in-file", run=ours("in-file"), setup=cycle_setup(values)),
            Case("none", run=ours("none"), setup=cycle_setup(values)),
            Case("parquet", run=parquet, setup=cycle_setup(values)),
            Case("duckdb", run=duck("parquet"), setup=cycle_setup(values)),
            Case("duckdb-bloom", run=duck("parquet-bloom"), setup=cycle_setup(values)),
        ],
        reps=ws.config.point_queries // 3,
        warmup=1,
        check=check,
    )
    shape = {"files": total, "rows_per_file": ROWS_PER_FILE, "lookups": len(values)}
    rows: list[Result] = []
    for name, label in (("manifest", "in the manifest"), ("in-file", "probed in the data files")):
        most = max(opened[name])
        rows.append(
            Result(
                group=GROUP,
                benchmark=f"lookup text = v over {total:,} files, bloom filters {label}: "
                "files opened (max over lookups) / total",
                value=most,
                unit="files",
                baseline=total,
                ratio=most / total,
                target="≤ 2 %",
                passed=most / total <= 0.02,
                details={**shape, "opened": opened[name]},
            )
        )
        rows.append(
            speed_row(
                GROUP,
                f"lookup text = v over {total:,} files, bloom filters {label} "
                "(baseline: the same table without an index)",
                lookups[name],
                lookups["none"],
                unit="ms",
                target_ratio=10,
                target_label="no index",
                details=shape,
            )
        )
    comparisons = (  # information rows: (appendtable or peer, baseline, what is compared)
        (
            "manifest",
            "parquet",
            f"lookup text = v over {total:,} files, bloom filters in the manifest "
            "(baseline: pyarrow dataset over the same rows as plain Parquet)",
        ),
        (
            "duckdb-bloom",
            "duckdb",
            f"DuckDB lookup over {total:,} Parquet files with Parquet bloom filters "
            "(baseline: the same files without them)",
        ),
        (
            "manifest",
            "duckdb-bloom",
            f"lookup text = v over {total:,} files, bloom filters in the manifest "
            "(baseline: DuckDB over Parquet files with Parquet bloom filters)",
        ),
    )
    for ours_case, baseline_case, label in comparisons:
        rows.append(
            speed_row(
                GROUP,
                label,
                lookups[ours_case],
                lookups[baseline_case],
                unit="ms",
                target_ratio=None,
                details=shape,
            )
        )
    rows += _sizes(layouts)
    rows += _write_cost(ws)
    return rows


def _sizes(layouts: dict[str, str]) -> list[Result]:
    def size(directory: str, suffix: str) -> int:
        return sum(
            os.path.getsize(os.path.join(root, name))
            for root, _, names in os.walk(directory)
            for name in names
            if name.endswith(suffix) and not is_temp_name(name)
        )

    manifests = {name: size(f"{layouts[name]}/manifest", "") for name in ("none", "manifest")}
    return [
        count_row(
            GROUP,
            "metadata kept by the bloom filters: manifests with their bitsets "
            "(baseline: manifests without an index), MB",
            manifests["manifest"] / 1e6,
            "MB",
            baseline=manifests["none"] / 1e6,
            details={
                "manifests_describing_in_file_filters_mb": size(
                    f"{layouts['in-file']}/manifest", ""
                )
                / 1e6,
                "data_files_with_filters_mb": size(layouts["in-file"], ".parquet") / 1e6,
                "data_files_without_mb": size(layouts["none"], ".parquet") / 1e6,
            },
        )
    ]


def _write_cost(ws: Workspace) -> list[Result]:
    data = make_table(ws.config.peer_rows, seed=11)

    def append(options: dict[str, str]) -> Callable[[str], object]:
        return lambda uri: at.create_table(uri, data.schema, options=options).append(data)

    def parquet(bloom: bool) -> Callable[[str], object]:
        extra = {"bloom_filter_options": {"text": {"ndv": data.num_rows, "fpp": 0.01}}}
        return lambda path: pq.write_table(
            data, path, compression="zstd", **(extra if bloom else {})
        )

    def path(stem: str) -> Callable[[], str]:
        return sync_then(lambda: ws.fresh_path(stem))

    timings = measure(
        [
            Case("index", run=append({**_BASE, **_INDEX}), setup=path("w-index")),
            Case("none", run=append(dict(_BASE)), setup=path("w-none")),
            Case("parquet-bloom", run=parquet(True), setup=path("p-bloom")),
            Case("parquet", run=parquet(False), setup=path("p-plain")),
        ],
        reps=ws.config.peer_reps,
        warmup=1,
    )
    shape = {"rows": data.num_rows}
    return [
        speed_row(
            GROUP,
            f"append {data.num_rows / 1e6:g} M rows with a bloom filter on text "
            "(baseline: the same append without; ≤ 10 % cost)",
            timings["index"],
            timings["none"],
            unit="s",
            target_ratio=1 / 1.1,
            target_label="no index",
            details=shape,
        ),
        speed_row(
            GROUP,
            f"pq.write_table {data.num_rows / 1e6:g} M rows with a Parquet bloom filter on "
            "text (baseline: without)",
            timings["parquet-bloom"],
            timings["parquet"],
            unit="s",
            target_ratio=None,
            details=shape,
        ),
    ]
