"""pyarrow's own GCS client, which reads data files where it can hold gcsfs's credentials,
reaches the server gcsfs reaches and gives up on an unreachable one in bounded time."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from appendtable.storage.registry import open_storage
from tests.emulators import Emulator

pytestmark = pytest.mark.gcs

ROOT = Path(__file__).resolve().parents[2]

JOB = textwrap.dedent(
    """
    import sys
    import pyarrow as pa
    import appendtable as at

    uri, project = sys.argv[1], sys.argv[2]
    options = {"token": "anon", "project": project}  # no endpoint_url: the environment names it
    table = at.create_table(
        uri,
        pa.schema([("k", pa.int64())]),
        options={
            "bucket": 1,
            "bucket-key": "k",
            "compaction.min.file-num": 2,
            "compaction.max.file-num": 3,
        },
        storage_options=options,
    )
    for i in range(6):
        table.append(pa.table({"k": [i]}))
    table.wait_for_maintenance()
    reopened = at.open_table(uri, storage_options=options)
    print(sorted(reopened.scan().to_arrow()["k"].to_pylist()))
    print(len(reopened.files()))
    """
)


def test_a_job_configured_by_storage_emulator_host_reads_and_exits(fake_gcs: Emulator) -> None:
    """Found by a docs-only hunt: with the emulator named only by STORAGE_EMULATOR_HOST (as
    docs/python.md says), gcsfs wrote to the emulator but pyarrow's client read data files
    from Google's endpoint, retrying for 15 minutes: compaction never finished and the job
    never exited."""
    endpoint = str(fake_gcs.storage_options["endpoint_url"])
    uri = fake_gcs.uri(f"tests/{uuid.uuid4().hex}")
    env = {**os.environ, "STORAGE_EMULATOR_HOST": endpoint}
    project = str(fake_gcs.storage_options["project"])
    done = subprocess.run(
        [sys.executable, "-c", JOB, uri, project],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows, files = done.stdout.split("\n")[:2]
    assert rows == str(list(range(6)))
    assert int(files) < 6  # compaction read the small files through the native client


def test_the_native_client_retries_for_a_bounded_time(
    fake_gcs: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", str(fake_gcs.storage_options["endpoint_url"]))
    options = {"token": "anon", "project": str(fake_gcs.storage_options["project"])}
    storage = open_storage(fake_gcs.uri(f"tests/{uuid.uuid4().hex}"), options)
    filesystem, _root = storage.arrow_filesystem()
    settings = filesystem.__reduce__()[1][0]
    assert (
        settings["endpoint_override"]
        == str(fake_gcs.storage_options["endpoint_url"]).split("://")[1]
    )
    limit = settings["retry_time_limit"]
    assert limit is not None and dt.timedelta(0) < limit <= dt.timedelta(minutes=1)
