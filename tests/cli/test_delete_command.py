"""``appendtable delete``: a dry run reports and writes nothing; a delete removes exactly the
rows its filters match (all must hold) and the scan, count and files commands agree."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import appendtable as at
from appendtable.commit.snapshots import flush_hints


def settled(root: Path, snapshot_id: int) -> None:
    """Wait for the hints (LATEST, EARLIEST), which a commit writes in the background after it
    landed: all of them, so that none is written while the test digests the tree."""
    flush_hints()
    hint = root / "snapshot" / "LATEST"
    deadline = time.monotonic() + 10
    while not (hint.exists() and hint.read_text() == str(snapshot_id)):
        assert time.monotonic() < deadline, "the LATEST hint was never written"
        time.sleep(0.01)


def digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize("vectors", ["true", "false"])
def test_delete_command(cli: Any, tmp_path: Path, vectors: str) -> None:
    uri = str(tmp_path / "t")
    schema = pa.schema([("id", pa.int64()), ("kind", pa.string())])
    table = at.create_table(
        uri, schema, options={"deletion-vectors.enabled": vectors, "write-only": "true"}
    )
    table.append(pa.table({"id": list(range(20)), "kind": [f"k{i % 4}" for i in range(20)]}))
    settled(Path(uri), 1)
    before = digest(Path(uri))
    dry = cli("delete", uri, "--filter", "kind = k1", "--filter", "id < 10", "--dry-run")
    assert dry.code == 0, dry.err
    assert dry.out.splitlines()[0].startswith("would delete 3 rows in 1 file")
    assert dry.out.splitlines()[-1] == "dry run: nothing was written"
    assert digest(Path(uri)) == before
    done = cli("delete", uri, "--filter", "kind = k1", "--filter", "id < 10")
    assert done.code == 0, done.err
    mode = "deletion-vectors" if vectors == "true" else "copy-on-write"
    how = "1 deletion vector written" if vectors == "true" else "1 file rewritten"
    assert done.out.splitlines() == [
        f"deleted 3 rows in 1 file ({how}, 0 removed; {mode})",
        "snapshot 2 (DELETE)",
    ]
    count = cli("scan", uri, "--count")
    assert count.out.strip() == "17"
    ids = cli("scan", uri, "--columns", "id", "--format", "csv")
    assert sorted(int(v) for v in ids.out.split()[1:]) == [
        i for i in range(20) if i not in (1, 5, 9)
    ]
    assert cli("delete", uri).code == 2  # no filter: refused, nothing deleted
    assert cli("delete", uri, "--filter", "nope = 1").code != 0
    assert at.open_table(uri).scan().count() == 17
