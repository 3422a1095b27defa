"""The hostile-table corpus (tests/security/hostile.py) through every operation that reads,
writes or deletes: scan, stream, compaction, expiration, orphan removal, rollback, the Iceberg
mirror, staging and the CLI. Whatever the damage: the canaries outside the table stay
byte-identical and nothing appears outside it, every failure is an appendtable error (no hang,
no foreign exception, no traceback from the CLI), dry runs change nothing, and metadata naming
a path outside the table is reported as CorruptMetadataError naming the file."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

import appendtable as at
from appendtable.cli import main
from appendtable.commit.metadata_cache import clear_metadata_caches
from tests.helpers.data import EVENTS
from tests.security.hostile import CASES, FUTURE, deadline, make_base, tree

BOUND_S = 60


def _attempt(operation: Callable[[], object]) -> object:
    """Run one operation within the time bound: its result, or the appendtable error it
    raised (anything else fails the test)."""
    clear_metadata_caches()
    with deadline(BOUND_S):
        try:
            return operation()
        except at.AppendTableError as exc:
            return exc


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> int:
    with deadline(BOUND_S):
        code = main(argv)
    out, err = capsys.readouterr()
    assert code in (0, 1), (argv, err)
    assert "Traceback" not in out + err
    if code:
        assert err.startswith("error: "), err
    return code


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hostile_table_never_touches_anything_outside_it(
    tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    place = make_base(tmp_path)
    damage, scan_raises = CASES[case]
    damage(place)
    outside = place.outside_tree()
    uri = str(place.root)

    opened = _attempt(lambda: at.open_table(uri))
    if isinstance(opened, at.AppendTableError):
        table = None
    else:
        assert isinstance(opened, at.Table)
        table = opened
    scanned = _attempt(lambda: at.open_table(uri).scan().to_arrow())
    if scan_raises is not None:
        assert isinstance(scanned, scan_raises), scanned
        if isinstance(scanned, at.CorruptMetadataError):
            assert scanned.path and scanned.path in str(scanned)
    if isinstance(scanned, pa.Table):  # whatever answer there is holds only the table's rows
        assert scanned.num_rows == 50
        assert sorted(scanned.column("seq").to_pylist()) == list(range(50))

    # dry runs change nothing, in the table or outside it
    inside = tree(place.root)
    if table is not None:
        _attempt(lambda: table.expire_snapshots(retain_min=1, older_than_ms=FUTURE, dry_run=True))
        _attempt(lambda: table.remove_orphan_files(older_than=FUTURE, dry_run=True))
    _cli(["remove-orphans", uri, "--older-than", "0s"], capsys)
    _cli(["expire", uri, "--older-than", "0s", "--retain-min", "1", "--dry-run"], capsys)
    assert tree(place.root) == inside
    assert place.outside_tree() == outside

    operations: list[Callable[[], object]] = [
        lambda: at.open_table(uri).scan().count(),
        lambda: _poll_all(at.open_table(uri)),
        lambda: at.open_table(uri).append(_nulls()),
        lambda: at.open_table(uri).compact(full=True),
        lambda: at.open_table(uri).publish_iceberg(rebuild=True),
        lambda: at.open_table(uri).expire_snapshots(retain_min=1, older_than_ms=FUTURE),
        lambda: at.open_table(uri).remove_orphan_files(older_than=FUTURE, dry_run=False),
        lambda: at.open_table(uri).rollback_to(tag="t2"),
        lambda: at.open_table(uri).staging_area("abandoned").remove(),
        lambda: at.open_table(uri).staging_area().adopt(["../../../outside/victims/v1.parquet"]),
        lambda: at.open_table(uri).remove_orphan_files(older_than=dt.timedelta(0), dry_run=False),
    ]
    for operation in operations:
        _attempt(operation)
        assert place.outside_tree() == outside
    for argv in (
        ["scan", uri],
        ["compact", uri, "--full"],
        ["expire", uri, "--older-than", "0s", "--retain-min", "1"],
        ["remove-orphans", uri, "--older-than", "0s", "--force"],
        ["rollback", uri, "1"],
        ["iceberg", uri, "--repair"],
    ):
        _cli(argv, capsys)
        assert place.outside_tree() == outside
    assert not (tmp_path / "outside" / "escaped").exists()


def _nulls() -> pa.Table:
    """Rows whose partition value is null (they land in the default partition directory)."""
    return pa.table(
        {
            name: pa.nulls(2, EVENTS.field(name).type)
            if name == "day"
            else pa.array(
                [1, 2]
                if name in ("key", "seq")
                else ([0.5, 1.5] if name == "value" else ["a", "b"]),
                EVENTS.field(name).type,
            )
            for name in EVENTS.names
        },
        schema=EVENTS,
    )


def _poll_all(table: at.Table) -> int:
    reader = table.stream(mode="latest-full")
    rows = 0
    for _ in range(100):
        unit = reader.poll()
        if unit is None:
            break
        rows += sum(b.num_rows for b in reader.read(unit))
    return rows
