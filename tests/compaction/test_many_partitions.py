"""A writer open on thousands of (partition, bucket) pairs stays within its memory budget and
still writes one file per pair per commit."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import appendtable as at

CHILD = textwrap.dedent(
    """
    import json, resource, sys
    import numpy as np, pyarrow as pa
    import appendtable as at

    uri, buffer_mb, batches = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    schema = pa.schema([("p", pa.int32()), ("k", pa.int64()), ("payload", pa.float64()),
                        ("tag", pa.string())])
    table = at.create_table(uri, schema, partition_by=["p"], options={
        "bucket": 4, "bucket-key": "k", "write-buffer-size": f"{buffer_mb} MB",
        "write-only": True, "commit.fsync": False})
    rng = np.random.default_rng(1)
    rows = 150_000

    def rss_kb():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize() // 1024

    def batch(i):
        return pa.table({
            "p": pa.array(rng.integers(0, 1000, rows), pa.int32()),
            "k": pa.array(rng.integers(0, 1_000_000, rows)),
            "payload": pa.array(rng.random(rows)),
            "tag": pa.array(np.char.add("t", (np.arange(rows) % 1000).astype(str))),
        }, schema=schema)

    batch(0)
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    written = 0
    samples = []
    with table.writer() as writer:
        for i in range(batches):
            data = batch(i)
            written += data.nbytes
            writer.write(data)
            del data
            samples.append((written, rss_kb()))
        messages = writer.prepare_commit()
    table.committer("memory-test").commit(messages)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"baseline_kb": baseline, "peak_kb": peak, "written": written,
                      "samples": samples}))
    """
)


@pytest.mark.slow
def test_thousand_partitions_by_four_buckets(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    out = subprocess.run(
        [sys.executable, "-c", CHILD, uri, "8", "16"],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    report = json.loads(out.stdout.strip().splitlines()[-1])
    written_mb = report["written"] / 2**20
    assert written_mb > 60  # many times the 8 MB budget went through the writer
    # Memory stops growing: over the second half of the input (about 30 MB more data), the
    # process grows by a small fraction of it, whatever the allocator keeps around.
    samples = report["samples"]
    half = len(samples) // 2
    more_data_kb = (samples[-1][0] - samples[half][0]) / 1024
    growth_kb = max(rss for _, rss in samples[half:]) - max(rss for _, rss in samples[:half])
    assert growth_kb < 0.25 * more_data_kb, samples
    assert (report["peak_kb"] - report["baseline_kb"]) / 1024 < 150, report
    table = at.open_table(uri)
    files = table.files()
    pairs = {(r["partition"], r["bucket"]) for r in files.to_pylist()}
    assert len(pairs) == 4000
    assert files.num_rows == 4000  # one file per pair: spilled, not cut into tiny files
    assert table.scan().count() == 16 * 150_000
