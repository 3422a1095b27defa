"""README sections after the main results table: compaction, Spark, peers, scaling (with the
plots) and memory. Each renders the rows of its benchmark group; the texts say how it is
measured."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from benchmarks.harness import TIMES, Result
from benchmarks.plots import Plot

__all__ = ["SECTIONS", "Section", "quantity", "results_table"]


def quantity(value: float | None, unit: str) -> str:
    """A value with its unit, as the tables show it ("—" for none)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if unit == "files":
        return f"{value:g} files"
    if unit == "x":
        return f"{value:.2f}{TIMES}"
    if unit == "s":
        return f"{value:.3f} s"
    if unit == "MB":
        return f"{value:.0f} MB"
    if unit == "Mrows/s":
        return f"{value:.2f} M rows/s"
    if unit == "skipped":
        return "—"
    if value < 0.1:
        return f"{value * 1000:.1f} µs"
    return f"{value:.2f} ms" if value < 100 else f"{value:.0f} ms"


def _ratio(result: Result) -> str:
    if result.ratio is None:
        return "—"
    if result.unit == "files":
        return f"1/{1 / result.ratio:.0f}"
    return f"{result.ratio:.2f}"


def results_table(results: Sequence[Result]) -> str:
    """The standard table: benchmark, appendtable, baseline, ratio, target, verdict."""
    lines = [
        "| benchmark | appendtable | baseline | ratio | target | verdict |",
        "|---|---:|---:|---:|---|---|",
    ]
    for r in results:
        cells = [
            r.benchmark,
            quantity(r.value, r.unit),
            quantity(r.baseline, "ms" if r.unit == "x" else r.unit),
            _ratio(r),
            r.target,
            _verdict(r),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _skips(results: Sequence[Result]) -> str:
    return "".join(
        f"**Skipped:** {r.details.get('skipped', 'unavailable')}\n"
        for r in results
        if r.unit == "skipped"
    )


def _standard(results: Sequence[Result], _plots: Sequence[Plot]) -> str:
    skipped = _skips(results)
    rows = [r for r in results if r.unit != "skipped"]
    return skipped + (results_table(rows) + "\n" if rows else "")


# ---- peers ---------------------------------------------------------------------------------------

PEER_COLUMNS = (
    ("appendtable", "appendtable"),
    ("pypaimon", "pypaimon"),
    ("deltalake", "delta-rs"),
    ("plain", "plain pyarrow"),
)


PEER_RATIOS = """
Each cell: the median, and in brackets the ratio *reference time / this system's time* (above
1: faster than the reference). The reference is plain pyarrow where it has the operation
(**=** marks it), appendtable otherwise.
"""


def _peer_cell(values: Mapping[str, float | None], system: str, reference: str, unit: str) -> str:
    """A system's median with its ratio against the row's reference system."""
    value, base = values.get(system), values.get(reference)
    shown = quantity(value, unit)
    if value is None or base is None or value <= 0:
        return shown
    if system == reference:
        return f"{shown} (=)"
    ratio = base / value
    return f"{shown} ({ratio:.2f}{TIMES})" if ratio >= 0.1 else f"{shown} ({ratio:.2g}{TIMES})"


def _peers(results: Sequence[Result], plots: Sequence[Plot]) -> str:
    verdicts = [r for r in results if r.passed is not None]
    results = [r for r in results if r.passed is None]
    lines = [
        "| workload | " + " | ".join(title for _, title in PEER_COLUMNS) + " |",
        "|---|" + "---:|" * len(PEER_COLUMNS),
    ]
    notes: dict[str, str] = {}
    for r in results:
        values, row_notes = r.details.get("systems", {}), r.details.get("notes", {})
        reference = "plain" if values.get("plain") else "appendtable"
        cells = []
        for system, _ in PEER_COLUMNS:
            note = row_notes.get(system)
            if note is not None:
                marker = notes.setdefault(note, f"[{len(notes) + 1}]")
                cells.append(f"n/a {marker}")
            else:
                cells.append(_peer_cell(values, system, reference, r.unit))
        lines.append(f"| {r.benchmark} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n" + PEER_RATIOS
    if notes:
        text += "\n" + "".join(f"{marker} {note}.  \n" for note, marker in notes.items())
    installs = next((r.details["installs"] for r in results if "installs" in r.details), {})
    if installs:
        text += "\nWhere each system ran:\n\n"
        for system, seen in installs.items():
            version = f" {seen['version']}" if seen.get("version") else ""
            took = seen.get("workload_seconds")
            timing = f"; workload {took:g} s" if took else ""
            text += f"* **{system}{version}**: {seen['status']}{timing}\n"
    counts = next((r.details for r in results if "files_after_commits" in r.details), {})
    if counts:
        after = counts.get("files_after_commits", {})
        compacted = counts.get("files_after_compact", {})
        text += "\nData files after the small commits (and after compacting them): " + ", ".join(
            f"{system} {after.get(system)} → {compacted.get(system) or 'n/a'}"
            for system in after
            if after.get(system) is not None
        )
        text += ".\n"
    if verdicts:
        text += "\nTargets:\n\n" + _standard(verdicts, plots)
    return text


# ---- scaling -------------------------------------------------------------------------------------


def _grid_table(results: Sequence[Result]) -> str:
    grid = next((r.details["write_grid"] for r in results if "write_grid" in r.details), None)
    if not grid:
        return ""
    partitions = sorted({g["partitions"] for g in grid})
    settings = sorted({g["buckets"] for g in grid if g["buckets"] is not None})
    header = ["partitions"] + [f"bucket={b}" for b in settings] + ["pyarrow write_to_dataset"]
    lines = ["| " + " | ".join(header) + " |", "|---:|" + "---:|" * (len(header) - 1)]
    for count in partitions:
        cells = {g["buckets"]: g["rows_per_s"] / 1e6 for g in grid if g["partitions"] == count}
        row = [str(count)] + [f"{cells[b]:.2f}" for b in settings] + [f"{cells[None]:.2f}"]
        lines.append("| " + " | ".join(row) + " |")
    return "\nWrite throughput, M rows/s:\n\n" + "\n".join(lines) + "\n"


def _scaling(results: Sequence[Result], plots: Sequence[Plot]) -> str:
    return _standard(results, plots) + _grid_table(results) + _figures(plots, "scaling")


def _figures(plots: Sequence[Plot], group: str) -> str:
    return "".join(
        f"\n![{plot.caption}]({plot.path})\n\n_{plot.caption}_\n"
        for plot in plots
        if plot.group == group
    )


# ---- a million files -----------------------------------------------------------------------------

#: What bounds each million-file measure (profiles: cProfile and phase timings of the
#: operation on the built tables, on this machine), written after looking at the figures.
MILLION_WHERE = """\
- **Run 4, on a quiet host** (2026-11-27 00:14 UTC, nothing else running: 419 s, CPU stall
  2.2 %), is the table above. At 1 M files: commit p99 2.5 ms, filtered plan 125 ms, full plan
  3.63 s (peak 1,341 MB), idle poll 3.4 µs, expiring 10,000 snapshots 5.5 s, orphan removal 28 s
  (peak 861 MB); at 10 k and 100 k files every target passed. The misses (filtered plan, full
  plan time and memory, orphan removal's memory) are bound by the work described below, not by
  the host: they missed by the same margins in every run.
- **Runs 1-3, none on a quiet host** (2026-11-26, while the test suite ran on the same 2 CPUs):
  `make bench-scale` took 617, 808 and 602 s (CPU stall 28, 73 and 40 %). At 1 M files, runs 1
  / 2 / 3: commit p99 5.5 / 11.6 / 4.7 ms, filtered plan 106 / 144 / 117 ms, full plan 3.45 /
  4.82 / 3.65 s (peak 1,342 MB each), idle poll 3.3 / 3.5 / 3.3 µs, expiring 10,000 snapshots
  7.0 / 18.0 / 7.2 s (5.0 / 24.0 / 6.7 s at 100 k files), orphan removal 31 / 37 / 31 s (peak
  2,220 / 861 / 861 MB: the cache fix below landed after run 1). Run 2's misses of commit p99
  and expiration came with 73 % CPU stall; run 3's misses at 10,000 files (commit p99 15.3 ms,
  filtered plan 69 ms) ran while a 1.2 M-file table was being deleted on the same disk.
- **Building** (a million files, 100,000 commits of 10 files through `TableCommit`, fsync off):
  133-192 s, about 1.5 ms a commit, most of it the committer's own work (delta manifest, both
  manifest lists, snapshot) and the tiered merges. The first attempt ran into a product bug:
  manifests were rolled by an *estimate* of their encoded size that ran above it, so a "full"
  manifest came out at 77 % of `manifest.target-file-size` (6.2 of 8 MB) and stayed a merge
  candidate; once 30 of them existed (about 960,000 files) every commit merged all of them and
  re-rolled them into 30 again, rewriting 186 MB per commit (27 GB of manifests written before
  the run was stopped). Manifests are now rolled at their exact encoded size
  (`codec.packed_size`), so a rolled manifest reaches the target and leaves the tiers (test: 150
  commits of 20 files wrote 48x the live manifest bytes, now under 6x).
- **Commit p99** (at 1 M files 2.5 ms on the quiet host, 4.7-11.6 ms in the loaded runs): the
  commit reads the latest snapshot and manifest list (cached), writes a one-entry manifest, two
  lists of about 55 entries and the snapshot, and fsyncs them. What grows with the table is the
  tiered manifest merging: the commit that fills a tier merges its 30 manifests (at a million
  files, tier 2 holds manifests of 0.5 to 8 MB), so a rare commit rewrites megabytes; the 300
  timed commits per size need not meet one. Not measured yet: the slowest commit over a whole
  build.
- **Partition-filtered plan, cold** (missed at 1 M: 106-144 ms, 16 ms warm). The manifest list's
  partition ranges skip 53 of the 54 manifests, but the one holding the day is an 8.4 MB
  manifest of 44,418 entries over 445 partitions, read whole for its 100 files. Its cost
  (cProfile, cold): MessagePack decode 43 ms, data-path validation 45 ms (every path checked
  before anything may be opened), CRC-32C (crcmod) 20 ms, the garbage collector's pass after the
  decode 21 ms, filtering 16 ms. A partition filter was first decided per file
  (`Filter.matches_partition` for each of the 44,418 entries, most of a 10,000-file plan); it is
  now decided once per partition (test: 3 evaluations, not 24). Meeting 50 ms cold needs reading
  less than a whole merged manifest: manifests clustered by partition with an index of where
  each partition's entries start, or a columnar manifest decoded lazily; a smaller
  `manifest.target-file-size` would trade it against more manifests per list.
- **Full plan, cold** (missed at 1 M: 3.45-4.82 s against 3 s; 1.35 s warm). cProfile of a fresh
  process: MessagePack decode of the 1,000,000 entries 0.89 s, data-path validation 0.76 s (0.25
  s without the profiler), CRC-32C of the 189 MB of manifests 0.41 s, the collector's pass after
  decoding 0.36 s, folding entries by path (set semantics) 0.55 s, grouping files per partition
  and bucket 0.76 s and packing 50,002 splits 0.58 s. Peak RSS 1.34 GB: the decoded entries cost
  about 1.2 KB each (RSS grew from 91 MB to 1,296 MB while they were read: a `ManifestEntry`,
  its `DataFileMeta`, the partition and three statistics tuples, four strings), and the
  process-wide metadata cache (bounded at 2 M entries) keeps all of them. 500 MB at a million
  files needs a columnar in-memory form (Arrow arrays of paths, sizes and statistics decoded
  from columnar manifests, splits as slices of them): a redesign of the planning path, not done
  here.
- **Idle poll** (met: 3.3 µs at every size; delta-rs `update_incremental()` 1.2 ms at 10,000
  files, 9.6 ms at 100,000): the reader probes for the next snapshot file; nothing grows with
  the table.
- **Expiration of 10,000 snapshots** (runs 1 and 3: 7.0 and 7.2 s at 1 M files, 5.0 and 6.7 s at
  100 k; run 2, under heavy contention, 18.0 and 24.0 s). Per expired snapshot: the snapshot
  file, its two manifest lists (about 55 entries each, to know which manifests no retained
  snapshot references) and four file deletions (snapshot, two lists, delta manifest): about 0.7
  ms. Fixed on the way: each expired snapshot was read twice (the snapshot cache holds the
  newest 1,024), and the delta manifest of every expired append was read to look for deleted
  files that its list entry already says it has none of (test: each snapshot read once, no
  manifest read; both parts fail on the old code); cProfile at 100 k files: 7.2 s before, of
  which these were 1.7 s and 1.4 s.
- **Orphan removal by listing** (1,000,010 files: 31-37 s; delta-rs `vacuum` is 5-8x faster at
  100,000 files; peak 861 MB at 1 M files, the "bounded" target read here as the full plan's 500
  MB). Phases at 1 M: listing the tree into 1.3 M candidates (data files and 303,466 metadata
  files) 10 s and +490 MB; the live set 23 s: every retained snapshot's file, both its manifest
  lists and its delta manifest (300,000 metadata reads, 5.5 M list entries decoded), and the
  sets of 1 M data paths and 303,466 metadata names. Peak RSS was 2.2 GB because every list and
  delta read stayed in the process-wide caches (about 1.5 GB); orphan removal now reads them
  without caching (test: the caches hold nothing afterwards). What remains is O(files) by
  design: all candidates and all referenced paths in memory at once. Bounded memory needs the
  walk and the comparison per partition directory (live paths grouped by partition from the
  manifests' partition ranges), and the per-snapshot list reads could follow the manifest lists'
  deltas instead (a manifest is referenced by a contiguous range of snapshots).
"""


def _million_builds(results: Sequence[Result]) -> str:
    series = next(
        (r.details["million_series"] for r in results if "million_series" in r.details), None
    )
    if not series:
        return ""
    lines = [
        "| live files | partitions | snapshots | build (appendtable) | metadata on disk | "
        "build (delta-rs log + checkpoint) | delta-rs log on disk | empty data files created |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for point in series:
        ours, delta = point["appendtable"], point.get("deltalake") or {}
        touch = (ours.get("orphans") or {}).get("touch_s")
        cells = [
            f"{point['files']:,}",
            f"{point['partitions']:,}",
            f"{point['snapshots']:,}",
            f"{ours['build_s']:.1f} s",
            f"{ours['metadata_mb']:.0f} MB",
            f"{delta['build_s']:.1f} s" if delta else "—",
            f"{delta['metadata_mb']:.0f} MB" if delta else "—",
            f"{touch:.1f} s" if touch is not None else "—",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\nThe tables built:\n\n" + "\n".join(lines) + "\n"


def _million(results: Sequence[Result], plots: Sequence[Plot]) -> str:
    return (
        _standard(results, plots)
        + _million_builds(results)
        + _figures(plots, "million")
        + "\nWhere the time goes:\n\n"
        + MILLION_WHERE
    )


# ---- memory --------------------------------------------------------------------------------------


def _verdict(result: Result) -> str:
    return f"**{result.verdict}**" if result.verdict == "MISS" else result.verdict


def _memory(results: Sequence[Result], _plots: Sequence[Plot]) -> str:
    lines = [
        "| write | appendtable peak RSS | above loaded data | baseline | baseline peak RSS | "
        "above loaded data | target (above loaded data) | verdict |",
        "|---|---:|---:|---|---:|---:|---|---|",
    ]
    for r in results:
        ours, plain = r.details["appendtable"], r.details["baseline"]
        label, _, baseline = r.benchmark.partition(": writer's peak RSS above the loaded data ")
        lines.append(
            f"| {label} | {ours['peak_rss_mb']:.0f} MB | {ours['writer_mb']:.0f} MB | "
            f"{baseline.strip('()').removeprefix('baseline: ')} | {plain['peak_rss_mb']:.0f} MB "
            f"| {plain['writer_mb']:.0f} MB | {r.target} | {_verdict(r)} |"
        )
    loaded = results[0].details["appendtable"] if results else None
    text = "\n".join(lines) + "\n"
    if loaded:
        text += (
            f"\nThe input ({loaded['rows']:,} rows, {loaded['data_mb']:.0f} MB in Arrow) is "
            f"loaded first ({loaded['loaded_rss_mb']:.0f} MB resident); the peak is reset after "
            "loading (Linux `clear_refs`) and the reader's freed buffers are handed back to the "
            "OS first, so the columns above the loaded data are the write's own memory.\n"
        )
    return text


# ---- where the time goes (profiles) ----------------------------------------------------------

#: Profile summaries of the performance targets, from cProfile and A/B runs in one
#: process on this 2-CPU machine (2026-11-24). The figures in the tables above are the
#: measurements; these say what bounds them.
WHERE_THE_TIME_GOES = """\
- **Commit latency, default options** (target p99 ≤ 5 ms at 1 and 10,000 snapshots). Before:
  compaction and expiration ran inside the commit (the "maintenance inline" rows, p99 13-46 ms
  in these runs). Now a worker thread per table handle runs them after the commit returned
  (`commit.maintenance` = `background`, the default); the same live file counts afterwards (rows
  "live files after the samples"). What is left at 10,000 snapshots (p99 about 5.2 ms against
  3.0 ms write-only): a profile of the worker there shows rounds of about 4 ms, mostly waiting
  for its rewrite threads and fsyncs (expiration 0.2 ms, little Python holding the GIL), so the
  tail is the commit meeting the worker's work: concurrent fsyncs on the same disk and, when the
  worker's COMPACT commit takes the next snapshot id first, one retry of the append. Next:
  count those retries in the benchmark, and let the handle's own commits go first.
- **Cold planning after 10,000 one-file commits** (target ≤ 10 ms). Decoded manifests, manifest
  lists and commit-user records are cached process-wide, keyed by table root and file name
  (they are immutable), so a new handle plans like a warm one. Per plan: about 45 % is reading
  entries (10,205 `ManifestEntry` objects: msgspec decode 0.7 µs each, CRC-32C of 1.1 MB by
  crcmod, about 3 ms, when not cached), 40 % grouping and sorting the entries per bucket and
  packing splits (Python, one pass over 10,205 files), the rest the snapshot and list reads.
  A process that has never read the table pays the decode (the "empty metadata cache" row,
  about 24 ms); a columnar manifest encoding would be the way to cut that.
- **Compacting 500 one-row files** (target ≤ 70 ms). Runs of small files in the table's schema
  are now read by one Arrow scan (its threads open files concurrently, in order) instead of file
  by file (224 -> 161 ms in an A/B run). Profile of what is left: Arrow's scan of the 500 files
  about 98 ms (0.2 ms of C++ set-up per file: open, footer, column readers), footer checksums
  5 ms, the write and commit the rest. Plain `pq.read_table` of the same files costs the same;
  70 ms needs a reader with less per-file set-up than pyarrow's (delta-rs reads with arrow-rs).
- **Stream catch-up over the last 100 commits** (target ≤ 25 ms). Profile (`batches(timeout=0)`
  over 100 one-file commits of 100 rows): planning 7 ms (snapshot, delta manifest list and
  manifest per unit), reading 52 ms: per file, the footer read and checked against its CRC,
  column checks, `ParquetFile` set-up and `iter_batches`. The floor for those files with plain
  pyarrow is 25 ms sequential (0.25 ms a file, mostly Python-level set-up under the GIL). Read-
  ahead on threads does not help files this small (59 ms in place, 72 ms read ahead: the hand-
  off costs more than the GIL-bound read), so files under 64 KB are read in place; for files of
  2 MB read-ahead gives 1.7x (299 -> 180 ms for 40 files).
- **Bucketed append of narrow numeric rows** (target ≥ 1.0x plain; rows "narrow numeric rows"
  in the main table, added this round; not optimised yet). Profile of 2 M rows, `bucket=8`:
  0.29 s against 0.14 s for `pq.write_table`. Routing on the calling thread takes 0.10 s (the
  Spark-compatible Murmur3 hash in numpy 0.04 s, `take` per bucket 0.02 s, index
  bookkeeping), then the caller waits 0.16 s for the eight bucket files to be encoded (zstd,
  statistics, page CRCs, fsync). On 2 CPUs the work is ~0.25 s of CPU against 0.14 s for the
  plain single file, so about 1.1x is the ceiling even with perfect overlap. Routing is already
  one stable radix sort and one `take`; what could shrink is the hash (numpy, several passes
  over the key; pyarrow has no Murmur3 kernel) and the int64 copies of the code folding.
- **Many partitions x buckets** (target: ≥ 0.8x `write_to_dataset`, peak RSS above the loaded
  data ≤ write buffer + 25 %; rows "100 partitions x 16 buckets" in Scaling and Memory). Memory
  (10 M rows, 256 MB buffer, spilling): 928 -> 305-313 MB above the loaded data (limit 336 MB;
  before and after measured by the same probe in one session). Before, the accounting summed
  each group's rows although every routed slice of input is one `take` buffer shared by all
  1,600 groups, so spilling "the largest groups" freed nothing; pressure was relieved only after
  the whole `write()` call; a spill concatenated everything spilled into one more copy; spill
  files were read back memory-mapped (every page stayed resident); and 48,000 buffered slice
  objects cost about 2 KB each. Now bytes are counted per routed slice until its last group or
  task lets go, room is made before each slice, a spill takes every buffered group (16 MB
  pieces), groups keep row ranges, and spill files are anonymous temp files read a batch at a
  time. What remains above the buffer is ~50 MB of routing transients, thread stacks and
  allocator slack. Throughput (1 M rows, 1,600 files) stays at 0.2-0.25x on a quiet host (0.25x
  in the run above; A/B in one session: 2.1 s before and after against 0.45 s), 0.35-0.5x
  against 0.2-0.26x before when other work loads the host (fsyncs now wait on 16 I/O threads,
  bucket directories are made on one while rows are routed). The write is CPU-bound: about
  2.4-3.4 CPU seconds against 0.9 for `write_to_dataset`, and 1 s of it is the kernel creating
  1,700 directories and 1,600 files on this VM (0.25 ms a directory, 0.38 ms a file, measured
  bare in Python; `write_to_dataset` creates 100 of each). That floor alone is 0.5 s of wall time
  on 2 CPUs against the 0.55 s that 0.8x allows, so the target is out of reach here with one
  directory and one file per (partition, bucket). The rest is per file in `datafiles/writing.py`
  (single-thread profile, fsync off: 1.2 ms a file: `write_table` 0.30 ms, file and
  `ParquetWriter` set-up 0.23 ms, statistics by Arrow compute 0.13 ms, footer read-back and close
  0.08 ms, Python glue ~0.3 ms) and routing on the calling thread (0.2-0.3 s per 1 M rows).
- **Spark against a measured floor** (target: within 10 % of the floor): see "Spark,
  performance round two" in the analysis below (the floor is a pyarrow-only Python data
  source; what is left is the JVM's row/Arrow conversion that every Python data source pays).
- **Point lookups on other columns** (target: files opened ≤ 2 %, ≥ 10x faster than without
  an index, ≤ 10 % write cost; group "file-index"). `file-index.bloom-filter.columns` makes the
  writer ask pyarrow for Parquet's own split-block bloom filters (one per column and row group,
  built in C++), and the manifest entry describes them: bitsets copied when a file's filters
  total at most `file-index.in-manifest-threshold` (500 B), else their offsets in the data
  file, where a lookup reads the bitset (cached when ≤ 64 KiB) or the one 32-byte block it
  needs. Literals are hashed with our own XXH64 of their PLAIN encoding. Lookups over 1,000
  files open at most 4 of them (0.4 %: the file holding the value and ~1 % false positives)
  and run 19-28x faster than without the index (26x faster than a pyarrow dataset scan of the
  same Parquet files, 6.7x faster than DuckDB using the files' own Parquet bloom filters,
  which must open every footer). The first design, numpy Murmur3 filters in sidecar files, cost
  37-70 % at 2 M rows (hashing 0.06 s per million strings, setting bits, and `np.unique` on the
  hashes 1.4 s per million); Parquet's C++ filters cost about 1 % at 0.2 M rows per append but
  21 % at 2 M rows in one append (row "append 2 M rows with a bloom filter"): a filter sized
  for a million distinct values is 2 MiB, beyond the CPU caches, so each insert is a cache miss
  (pyarrow's own `write_table` pays 47 % for the same filter on one thread). Smaller filters
  (a larger `fpp`, or `file-index.bloom-filter.items` for columns with few distinct values)
  cost less; 10 % at this size would need blocked filters per row-group slice.
"""


def _where(results: Sequence[Result], plots: Sequence[Plot]) -> str:
    return (
        _standard(results, plots)
        + "\nWhere the time goes, target by target:\n\n"
        + (WHERE_THE_TIME_GOES)
    )


# ---- the sections --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Section:
    title: str
    groups: tuple[str, ...]
    method: str  # how it is measured (markdown)
    render: Callable[[Sequence[Result], Sequence[Plot]], str] = _standard


SECTIONS: tuple[Section, ...] = (
    Section(
        "Deletes",
        ("deletes",),
        """\
One table of the benchmark rows in ten appends (`bucket` = 8 on `key`, `write-only`, fsync on):
about 80 files. Each repetition deletes `value < 0.01` (1 % of the rows, spread over every file:
a predicate on a non-partition column) from a fresh copy (`shutil.copytree`, untimed) on a fresh
handle, and the deleted row count is checked. Peers delete the same rows from the same data
written in ten appends: delta-rs `DeltaTable.delete` (fresh copy each time) and pyiceberg
`Table.delete` (a SQLite catalog; a fresh table appended each time, untimed). The plain
baseline reads the predicate's column of every data file with `pyarrow.dataset` and evaluates
it. The scans compare the table with vectors over its 80 files against the same table without
deletes, fresh handles, 5 repetitions each. The S3 rows run both deletes once each on a table
built on a SeaweedFS server on this machine (so they measure request cost, not a region's
latency) and compare them with the same deletes on local disk.

Reading a file with a vector costs one more Arrow `filter` of its rows (a copy of every kept
value: pyarrow's Parquet reader cannot skip rows while decoding). On 2 cores, plain pyarrow
reading the same 80 files one by one and filtering each costs 1.13 to 1.25x the time of reading
them without the filter (measured with `pyarrow.parquet` alone, 7 runs; the allocator alone
moves it from 1.13x with jemalloc to 1.33x with mimalloc, pyarrow's default here). The full-scan
row misses its 1.1x target: 1.29 to 1.39x in three runs of 5 repetitions on a quiet host
(2026-11-26), when every file with a vector was read on its own. Since 2026-11-27 an unfiltered
scan reads them through one dataset scan that filters each batch as it comes: measured side by
side on a slower 2-core host (12 repetitions, public API, two runs each), 1.27 and 1.38x
against 1.38 and 1.45x before. The filtering itself is about 0.11 s of CPU against 0.4 s for
the whole scan without deletes, so the target needs a reader that skips deleted rows while
decoding. Filtered reads of files with vectors now evaluate the filter on its own columns
first and read the other columns only for row groups with a match: a query on `value` matching
one row took 249 ms against 497 ms before (the table without deletes: 418 ms, as its scan
reads every column). The point query on the bucket key matches rows in every file of its bucket,
so it gains nothing from that: 1.25 to 1.35x its time without deletes, before and after.
Measured again on 2026-11-28 on a slower 2-core host (0.41 to 0.45 s without deletes), 15
alternating repetitions per run: 1.12 to 1.27x from run to run; masks built from each batch's
share of the positions, jemalloc, and filtering per file on threads changed nothing beyond
that spread. The full-scan target stays missed: the copy of the kept values is the cost.
""",
    ),
    Section(
        "Compaction",
        ("compaction",),
        """\
Tables built with `write-only` (no automatic compaction) and fsync on; each repetition
compacts a fresh copy (`shutil.copytree`, untimed) on a fresh handle. The baseline reads the same
files with `pq.read_table(list_of_files)` and writes them as one zstd file with `pq.write_table`
(not fsynced). After every compaction the row count is checked, and that the rows come back in
the order they were written. The file counts use 100-row appends (fsync on) with default options
(automatic compaction after each commit) or `write-only` and one `compact(full=True)` at the end;
the baseline column there is the number of files without any compaction.
""",
    ),
    Section(
        "Spark",
        ("spark",),
        """\
One local[2] session (driver 4 GB) for every case. Reads aggregate every column
(`count`, `sum(key)`, `sum(value)`, `sum(length(text))`) so every value is decoded; the four
reads must agree. The table read was written by the format from the same cached DataFrame the
`spark.read.parquet` baseline was written from (`df.write.parquet(..., compression="zstd")`), so
both have one file per task. Writes use that cached DataFrame: through the format (the Python
writer on executors), and through `write_table`, whose native path lets Spark's Parquet writer
write into a staging area before the driver checks the footers, moves the files into the table
and commits (`native=False` measures the Python writer on the same bucketed write). Write
baselines use zstd level 1, the table's default (Spark's default level 3 costs more CPU); the
baseline for the bucketed writes is `df.repartition(8, "key").write.parquet` (the same
shuffle). The floor (`benchmarks/spark_floor.py`) is the least a Python data source can do:
it reads the table's own data files with `pyarrow.parquet` (one task per file, Arrow batches,
no cast) and writes one zstd-1 Parquet file per task with `ParquetWriter` (no checksums, no
fsync, a commit that only collects names); the format's rows against it show what the format
adds on top of the Python Data Source API. Streaming:
`readStream.format("appendtable")` → `writeStream.format("appendtable")`, trigger 500 ms; after
the query has written its first micro-batch, each timed append of 100 rows to the source is
preceded by a random pause (0-0.5 s, so appends land at random points of the trigger cycle), and
the latency runs from `append()` returning until the sink's latest snapshot holds the rows
(polled every 2 ms).
""",
    ),
    Section(
        "Peers",
        ("peers",),
        """\
The same workloads on the same data (Parquet files written once and read by every system), each
system in a subprocess of its own, one after the other: appendtable and plain pyarrow in this
virtualenv, pypaimon and delta-rs in virtualenvs of their own under `.bench/venvs/` (created on
first use: pypaimon pins an older pyarrow). Every system runs with its default options:
appendtable fsyncs data and metadata and compacts small files after commits; delta-rs and
pypaimon do not fsync. delta-rs tables have the change data feed on (for the incremental read);
pypaimon tables live in a filesystem catalog. Reads and plans open a fresh handle each time;
appends keep one handle (as a long-running writer would). Bulk rows are the median of the
repetitions (one run when an operation takes more than ~10 s). The point query uses the
bucketed table where the system has buckets (appendtable, pypaimon) and the unbucketed one
otherwise, over 10 keys. The incremental read reads the rows of the last commits: appendtable
`stream(mode="from-snapshot")`, delta-rs `load_cdf(starting_version, ending_version)`, pypaimon
its streaming scan positioned at the first of those snapshots (one catch-up diff plan).
""",
        _peers,
    ),
    Section(
        "Tailing",
        ("tailing",),
        """\
A writer process appends 10 rows every 10 ms for 6 s with default options (fsync on,
automatic compaction in the background); a reader process tails the table
(`stream(mode="latest", poll_interval=0.001)`). A batch's latency runs from its `append()`
returning until the reader holds its rows (one monotonic clock for both processes; a batch
seen before its `append()` returned counts as 0); the first tenth of the appends are left out
as warm-up. Both processes share the 2 cores.
""",
    ),
    Section(
        "Append latency",
        ("append-latency",),
        """\
`Table.append()` of a one-row table, as users call it: one handle, 600 timed appends after 20
untimed ones, back to back and then one every 10 ms (the caller sleeps until the next is due);
each mode in a process of its own, on a table of its own, one after the other: default options
(fsync on, compaction and expiration on the handle's background worker),
`commit.maintenance=inline` (the same work inside `append()`) and `write-only` (the commit
alone). The target compares the tails measured in the same run: default options' p99 at most
2x write-only's p99.
""",
    ),
    Section(
        "Scaling",
        ("scaling",),
        """\
History: one `write-only` table, fsync on, grown by one-row appends; at each point: planning
a full scan (cold: `open_table` + `plan`; warm: same handle; median of 10), 200 `poll()` calls
on a stream at the latest snapshot, then up to N timed one-row commits (commit only, and
write + commit). Write grid: one append of the same rows into P partitions (`part = key % P`)
x B buckets (bucket-key `key`), fresh table per repetition. Compaction curve: one table grown by
one-row appends; at each point a copy is compacted with `compact(full=True)`.
""",
        _scaling,
    ),
    Section(
        "A million files",
        ("million",),
        """\
`make bench-scale` (`python -m benchmarks.run --only million`; not part of `make bench` or `make
bench-quick`). Tables of N live data files over N/100 daily partitions and N/10 APPEND
snapshots, N = 10,000, 100,000 and 1,000,000, built from fabricated data-file metadata
(realistic statistics of four columns, footer checksums) committed through the table's own
`TableCommit`, ten files a commit, so the manifests, their merges, the manifest lists and the
snapshots are those real appends of the same files would make; the data files are never written,
and planning never opens one (`benchmarks/fabricate.py`). The delta-rs tables have the same
files, partitions, statistics and number of commits, as a transaction log of JSON commits and a
checkpoint of the last version (`benchmarks/delta_scale.py`). Commits: one-row files written
into the newest partition (untimed), then `TableCommit.commit` timed, fsync on, 3 rounds of 100
after 5 untimed; the worst round's p99 (delta-rs: `write_deltalake` of the same one-row table on
one loaded `DeltaTable`, which writes its file too; 3 rounds of 20). Partition-filtered plan:
`open_table` + `scan(filter=[("day", "=", d)]).plan()` of a partition in the middle of the
history, the process's metadata caches emptied first; slowest of 5 (delta-rs:
`DeltaTable(uri).file_uris(file_pruning_predicate=...)`; the runs below passed the same filter
as the deprecated `partition_filters`). Full plan: `open_table` + `scan().plan()` in a fresh
process, with the process's peak RSS (Linux `VmHWM`, imports included); slowest and largest of 3
(delta-rs: `DeltaTable(uri).file_uris()`). Idle poll: median of 200 `poll()` of a stream at the
latest snapshot, worst of 3 rounds (delta-rs: `update_incremental()`). Orphan removal: every
data file created on disk, empty, plus 10 unreferenced ones, then
`remove_orphan_files(dry_run=True)` in a fresh process, which must find exactly the 10
(delta-rs: `vacuum(dry_run=True, retention_hours=0)` over its own copy of the files).
Expiration: `expire_snapshots` of the oldest 10,000 snapshots (all but 10 where fewer), 3 times
where the history allows, else once; the slowest counts. Every plan is checked against the
number of files the shape put there.
""",
        _million,
    ),
    Section(
        "Memory",
        ("memory",),
        """\
Each write runs in a fresh Python process (`python -m benchmarks.rss_probe`) that first loads
the input from Parquet, then writes it once; `ru_maxrss` after the write is the peak.
""",
        _memory,
    ),
    Section(
        "Commit latency and planning, and where the time goes",
        ("commit", "plan"),
        "one-row commits (`TableCommit.commit` of a written file, so whatever maintenance the "
        "table runs after a commit is included), fsync on, tables of each history size sampled "
        "in rotation with a floor publish (the baseline column) per round; the inline rows are "
        "copies of the default-options tables switched to `commit.maintenance=inline`. The "
        "analysis comes from cProfile and A/B runs of each operation in one process.",
        _where,
    ),
)
