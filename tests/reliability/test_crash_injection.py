"""Processes SIGKILLed at random times and at exact points inside commits, compactions and
expirations never leave a table that loses acknowledged appends, shows half an append, has
gaps in its snapshot ids or breaks time travel; orphan removal reclaims what they left.

One table lives through ~250 kills. Each child is a fresh process (forked from a forkserver
that preloaded pyarrow, ~25 ms) running ``crash_children.writer_child``: it appends unique rows
``(run, n, i)``, compacts and expires, and logs each acknowledged append durably *after*
``append()`` returned. After every kill the parent opens the table and checks it against the
log."""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import appendtable as at
from appendtable._state import TableState
from appendtable.orphans import TEMP_FILE_MIN_AGE_MS
from appendtable.storage import LocalStorage
from appendtable.table import Table
from tests.helpers.clock import age, past_every_file_ms
from tests.helpers.crash import fork_context, read_log, run_child
from tests.reliability import crash_children as children
from tests.reliability.crash_children import (
    APPEND_POINTS,
    COMPACT_POINTS,
    ROWS_PER_APPEND,
    WRITER_SCHEMA,
)

EXACT_ROUNDS = 11  # x 13 exact points
RANDOM_KILLS = 110
EXPIRE_TARGETS = ("snapshots", "between", "files")

Key = tuple[int, int]  # (run, n): one append


@dataclass
class History:
    """What the children logged: begun and acknowledged appends, and how each run ended."""

    begun: dict[Key, int] = field(default_factory=dict)  # append -> latest id before it
    acked: dict[Key, int] = field(default_factory=dict)  # append -> its snapshot id
    in_flight: dict[int, tuple[str, ...]] = field(default_factory=dict)  # run -> last begin
    kills: dict[int, list[str]] = field(default_factory=dict)  # run -> its kill line
    errors: list[str] = field(default_factory=list)


def parse(log_path: str) -> History:
    history = History()
    for line in read_log(log_path):
        event, run = line[0], int(line[1])
        if event == "begin":
            history.in_flight[run] = tuple(line[2:])
            if line[2] == "append":
                history.begun[(run, int(line[3]))] = int(line[4])
        elif event == "ack":
            history.acked[(run, int(line[2]))] = int(line[3])
            history.in_flight.pop(run, None)
        elif event == "end":
            history.in_flight.pop(run, None)
        elif event == "kill":
            history.kills[run] = line[2:]
        elif event == "error":
            history.errors.append(" ".join(line[2:]).replace("\\n", "\n"))
    return history


def appends_in(table: pa.Table) -> set[Key]:
    """The appends a scan holds, asserting each is whole and present exactly once."""
    if table.num_rows == 0:
        return set()
    stats = table.group_by(["run", "n"]).aggregate(
        [("i", "count"), ("i", "count_distinct"), ("i", "min"), ("i", "max")]
    )
    whole = pc.and_(
        pc.and_(
            pc.equal(stats["i_count"], ROWS_PER_APPEND),
            pc.equal(stats["i_count_distinct"], ROWS_PER_APPEND),
        ),
        pc.and_(pc.equal(stats["i_min"], 0), pc.equal(stats["i_max"], ROWS_PER_APPEND - 1)),
    )
    broken = stats.filter(pc.invert(whole))
    assert broken.num_rows == 0, f"appends torn or duplicated: {broken.to_pylist()[:5]}"
    return set(zip(stats["run"].to_pylist(), stats["n"].to_pylist(), strict=True))


def check_table(
    uri: str, history: History, verified: dict[int, set[Key]], *, rescan: bool
) -> tuple[at.Table, set[Key]]:
    """(a) opens and scans, (b) acknowledged appends exactly once, (c) nothing half-visible
    and nothing unacknowledged but in-flight appends, (d) contiguous ids, (e) time travel.

    Snapshots are immutable, so ``verified`` remembers the appends each one was found to hold;
    unless ``rescan``, a snapshot read before is only re-planned and its data files checked
    for existence (what an expiration or a crash could break), not read again."""
    table = at.open_table(uri)
    snapshots = table.snapshots()
    if not snapshots:  # nothing ever landed (the first child died before publishing)
        assert not history.acked and table.scan().count() == 0
        return table, set()
    ids = [s.id for s in snapshots]
    assert ids == list(range(ids[0], ids[-1] + 1)), f"snapshot ids have gaps: {ids}"
    latest, earliest = table.latest_snapshot(), table.earliest_snapshot()
    assert latest is not None and latest.id == ids[-1]
    assert earliest is not None and earliest.id == ids[0]

    by_snapshot: dict[int, set[Key]] = {}
    for key, snapshot_id in history.acked.items():
        by_snapshot.setdefault(snapshot_id, set()).add(key)
    acked_before = {k for k, sid in history.acked.items() if sid < ids[0]}
    previous: set[Key] | None = None
    for snapshot in snapshots:
        scan = table.scan(snapshot_id=snapshot.id, columns=["run", "n", "i"])
        keys = verified.get(snapshot.id)
        if keys is None or rescan:
            rows = scan.to_arrow()
            assert rows.num_rows == snapshot.total_record_count, snapshot
            keys = appends_in(rows)
            assert verified.setdefault(snapshot.id, keys) == keys
        else:
            files = [file for split in scan.plan() for file in split.files]
            assert sum(file.row_count for file in files) == snapshot.total_record_count
            gone = [f.path for f in files if not os.path.exists(os.path.join(uri, f.path))]
            assert not gone, f"snapshot {snapshot.id} lost data files {gone}"
        acked_before |= by_snapshot.get(snapshot.id, set())
        missing = acked_before - keys
        assert not missing, f"snapshot {snapshot.id} lacks acknowledged appends {missing}"
        unknown = keys - history.begun.keys()
        assert not unknown, f"snapshot {snapshot.id} holds appends never made: {unknown}"
        if previous is not None:
            assert previous <= keys, f"snapshot {snapshot.id} lost rows of {snapshot.id - 1}"
            added = keys - previous
            if snapshot.kind == at.CommitKind.APPEND:
                assert len(added) == 1, f"snapshot {snapshot.id} added {added}"
                (key,) = added
                assert history.acked.get(key, snapshot.id) == snapshot.id
            else:
                assert snapshot.kind == at.CommitKind.COMPACT and not added
        previous = keys
    assert previous is not None
    scanned = appends_in(table.scan(columns=["run", "n", "i"]).to_arrow())
    assert scanned == previous
    # the bloom filters on "i" (probed in the data files) skip files, never rows
    probe = table.scan(columns=["run", "n"], filter=[("i", "=", 3)]).to_arrow()
    assert set(zip(probe["run"].to_pylist(), probe["n"].to_pylist(), strict=True)) == scanned
    assert history.acked.keys() <= scanned
    for run, n in scanned - history.acked.keys():
        # never acknowledged: only the append its process was in when killed may be there
        assert history.in_flight.get(run) == ("append", str(n), str(history.begun[(run, n)]))
    return table, scanned


def latest_hint(uri: str) -> str:
    path = Path(uri) / "snapshot" / "LATEST"
    return path.read_text() if path.exists() else ""


def check_exact_kill(
    uri: str, table: at.Table, scanned: set[Key], history: History, run: int
) -> str:
    """Checks specific to where the child died; returns the kill point's name for counting."""
    point, detail = history.kills[run][0], history.kills[run][1]
    op, *args = history.in_flight[run]
    assert op == point.split(":")[0], (op, point)  # it died inside the operation it armed
    latest_snapshot = table.latest_snapshot()
    latest = 0 if latest_snapshot is None else latest_snapshot.id
    if point.startswith("append:"):
        n, before = int(args[0]), int(args[1])
        if point == "append:after-link":
            # published but never acknowledged: visible, and the LATEST hint is stale
            assert (run, n) in scanned and latest == before + 1
            assert int(latest_hint(uri) or 0) <= before
        else:
            assert (run, n) not in scanned and latest == before, (point, latest, before)
    elif point.startswith("compact:"):
        before = int(args[0])
        if point == "compact:after-link":
            assert latest_snapshot is not None and latest == before + 1
            assert latest_snapshot.kind == at.CommitKind.COMPACT
        else:
            assert latest == before, (point, latest, before)
    else:
        kind, _path, snapshot_deletes, other_deletes = detail.split(":")
        if kind == "snapshot":
            return "expire:mid-snapshot-deletes"
        if int(other_deletes) == 0:
            assert int(snapshot_deletes) > 0
            return "expire:after-snapshots-before-files"
        return "expire:mid-file-deletes"
    return point


def exact_plans(rng: random.Random) -> list[dict[str, object]]:
    """EXACT_ROUNDS x every exact kill point. ``nth``: which matching call to die at (an append
    writes 2-4 data files and two manifest lists; a compaction rewrites 1-4 buckets)."""
    plans: list[dict[str, object]] = []
    for _ in range(EXACT_ROUNDS):
        for point in (*APPEND_POINTS, *COMPACT_POINTS):
            where = point.split(":")[1]
            nth = {"data-file": 3 if point.startswith("append") else 2, "manifests-written": 2}
            plans.append(
                {
                    "point": point,
                    "nth": rng.randint(1, nth.get(where, 1)),
                    # a compaction needs at least two new small files per bucket to merge
                    "appends": rng.randint(0, 2)
                    if point.startswith("append")
                    else rng.randint(2, 3),
                }
            )
        for target in EXPIRE_TARGETS:
            plans.append({"point": "expire:delete", "target": target, "appends": rng.randint(1, 3)})
    return [{"mode": "exact", **plan} for plan in plans]


def disk_files(root: Path) -> tuple[list[Path], list[Path]]:
    """(.parquet files, temp files) under the table root."""
    files = [p for p in root.rglob("*") if p.is_file()]
    return [p for p in files if p.suffix == ".parquet"], [p for p in files if p.suffix == ".tmp"]


def retained_files(table: at.Table) -> tuple[set[str], set[str]]:
    """(data files live in some retained snapshot, data files named by some retained snapshot's
    manifests: live, or only mentioned by an entry that deletes them)."""
    manifests = table._state.manifests
    live: set[str] = set()
    named: set[str] = set()
    for snapshot in table.snapshots():
        live.update(entry.file.path for entry in manifests.live_files(snapshot))
        for manifest in manifests.all_manifests(snapshot):
            named.update(entry.file.path for entry in manifests.read_manifest(manifest.file_name))
    return live, named


@pytest.mark.slow
def test_kills_at_random_times_and_exact_points(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    log_path = str(tmp_path / "log")
    at.create_table(
        uri,
        WRITER_SCHEMA,
        partition_by=["p"],
        options={
            "bucket": 2,
            "bucket-key": "k",
            "write-only": True,
            "commit.fsync": False,
            "file-index.bloom-filter.columns": "i",  # probed in the files: threshold 0
            "file-index.in-manifest-threshold": 0,
        },
    )
    rng = random.Random(20240506)
    plans: list[dict[str, object]] = exact_plans(rng)
    plans += [{"mode": "random", "delay": rng.uniform(0.02, 0.3)} for _ in range(RANDOM_KILLS)]
    rng.shuffle(plans)
    context = fork_context(["tests.reliability.crash_children"])

    verified: dict[int, set[Key]] = {}
    kills: Counter[str] = Counter()
    missed: Counter[str] = Counter()
    for run, plan in enumerate(plans, start=1):
        plan["seed"] = rng.randrange(2**32)
        delay = plan.get("delay")
        code = run_child(
            context,
            children.writer_child,
            (uri, log_path, run, plan),
            kill_after=float(delay) if isinstance(delay, float) else None,
        )
        history = parse(log_path)
        assert not history.errors, history.errors[0]
        assert code in (0, -9), f"run {run} ({plan}) exited with {code}"
        in_expire = history.in_flight.get(run, ("",))[0] == "expire"
        table, scanned = check_table(uri, history, verified, rescan=in_expire or run % 10 == 0)
        if plan["mode"] == "random":
            assert code == -9, f"run {run} ended before its kill"
            kills[f"random:{history.in_flight.get(run, ('idle',))[0]}"] += 1
        elif code == 0:
            missed[str(plan["point"])] += 1  # the point was not reached (nothing to do)
        else:
            kills[check_exact_kill(uri, table, scanned, history, run)] += 1
        if run % 4 == 0:
            table.compact(full=True)  # keep reads cheap: killed compactions do not merge files

    total = sum(kills.values())
    print(
        f"\n{total} kills: {dict(sorted(kills.items()))}; exact points not reached: {dict(missed)}"
    )
    assert total >= 200
    for point in (*APPEND_POINTS, *COMPACT_POINTS):
        assert kills[point] >= 5, (point, kills)
    for name in (
        "expire:mid-snapshot-deletes",
        "expire:after-snapshots-before-files",
        "expire:mid-file-deletes",
    ):
        assert kills[name] >= 5, (name, kills)
    # random kills land mostly in appends and compactions (expirations are short: the exact
    # points above cover them)
    assert kills["random:append"] >= 20 and kills["random:compact"] >= 5, kills

    # what the dead left behind: temp files of unpublished snapshots, unreferenced data files
    root = Path(uri)
    table = at.open_table(uri)
    parquet, temps = disk_files(root)
    live, named = retained_files(table)
    unpublished = kills["append:before-link"] + kills["compact:before-link"]
    assert len([p for p in temps if p.parent.name == "snapshot"]) >= unpublished
    assert any(str(p.relative_to(root)) not in named for p in parquet)

    # a temporary file is an orphan only once it is older than a live write could be: the
    # dead left theirs an hour ago, as far as orphan removal can tell
    age(temps, seconds=TEMP_FILE_MIN_AGE_MS / 1000 + 60)
    removed = table.remove_orphan_files(older_than=past_every_file_ms(), dry_run=False)
    assert removed.files and not removed.dry_run
    table = at.open_table(uri)
    parquet, temps = disk_files(root)
    assert temps == [], temps[:5]
    on_disk = {str(p.relative_to(root)) for p in parquet}
    live, named = retained_files(table)
    assert on_disk <= named, f"{len(on_disk - named)} data files no retained snapshot references"
    assert live <= on_disk
    # Files that only a DELETE entry still names survive until a manifest merge drops the
    # entry: see test_interrupted_expiration_leaks_deleted_files.
    print(
        f"data files on disk: {len(on_disk)}, only named by DELETE entries: {len(on_disk - live)}"
    )
    check_table(uri, parse(log_path), verified, rescan=True)


class _CrashAtDelete(LocalStorage):
    """Stands for a process killed before its ``nth`` delete: raises, so nothing after it
    runs (expiration does not catch errors from snapshot-file deletes)."""

    def __init__(self, root: str, nth: int) -> None:
        super().__init__(root, fsync=False)
        self.left = nth

    def delete(self, path: str) -> None:
        self.left -= 1
        if self.left == 0:
            raise _Killed(path)
        super().delete(path)


class _Killed(BaseException):
    pass


@pytest.mark.parametrize("die_at_delete", [4, 5], ids=["mid-snapshot-deletes", "before-files"])
def test_interrupted_expiration_leaks_deleted_files(tmp_path: Path, die_at_delete: int) -> None:
    uri = str(tmp_path / "t")
    schema = pa.schema([("k", pa.int64())])
    table = at.create_table(uri, schema, options={"write-only": True, "commit.fsync": False})
    for k in range(3):
        table.append(pa.table({"k": [k]}, schema=schema))
    table.compact(full=True)  # snapshot 4 deletes the three files
    for k in range(3):
        table.append(pa.table({"k": [10 + k]}, schema=schema))
    # expiring 1..4 (keeping 5, 6, 7) dies before deleting snapshot-4, or after deleting all
    # four snapshot files, before the first of the files compacted away in snapshot 4
    crashing = Table(TableState(_CrashAtDelete(uri, nth=die_at_delete), table._state.schema))
    with pytest.raises(_Killed, match="snapshot-4" if die_at_delete == 4 else "parquet"):
        crashing.expire_snapshots(retain_min=3, older_than_ms=int(time.time() * 1000) + 1)
    table = at.open_table(uri)
    assert [s.id for s in table.snapshots()][-3:] == [5, 6, 7]
    table.expire_snapshots(retain_min=2, older_than_ms=int(time.time() * 1000) + 1)
    table.remove_orphan_files(older_than=past_every_file_ms(), dry_run=False)
    table = at.open_table(uri)
    live, _ = retained_files(table)
    on_disk = {str(p.relative_to(uri)) for p in Path(uri).rglob("*.parquet")}
    assert on_disk == live, f"{len(on_disk - live)} compacted-away files are never reclaimed"
    assert sorted(table.scan().to_arrow()["k"].to_pylist()) == [0, 1, 2, 10, 11, 12]
