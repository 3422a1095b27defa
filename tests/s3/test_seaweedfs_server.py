"""The test server itself: a SeaweedFS short of disk refuses every write (each PUT answers
"InternalError", which says nothing of the cause). Its floor of free disk is set low, and when
it still cannot store anything, start-up fails within its deadline saying how much disk is free
and what the server logged. One CI run had every S3 test fail that way under SeaweedFS's
default floor (1 % of the disk: 2.5 GB of a 252 GB disk shared with other machines)."""

from __future__ import annotations

import shutil
import tempfile

import pytest

from tests.s3.seaweedfs import MIN_FREE_SPACE, SeaweedFS, SeaweedFSUnavailable, start_seaweedfs

pytestmark = pytest.mark.s3


@pytest.mark.slow
def test_a_server_short_of_disk_fails_to_start_in_time_and_says_why() -> None:
    free_gib = shutil.disk_usage(tempfile.gettempdir()).free // 2**30
    floor = f"{free_gib + 1024}GiB"  # a terabyte more than is free: every volume refused
    with pytest.raises(SeaweedFSUnavailable) as raised:
        start_seaweedfs(min_free_space=floor, timeout_s=10.0, attempts=1)
    message = str(raised.value)
    assert f"writes are refused below {floor}" in message
    assert " MiB free under " in message
    assert "disk free " in message and " < required " in message  # the server's own check


def test_the_session_server_runs_with_a_floor_far_below_one_percent(seaweedfs: SeaweedFS) -> None:
    with open(f"/proc/{seaweedfs.process.pid}/cmdline", "rb") as handle:
        arguments = handle.read().decode().split("\0")
    assert "-volume.minFreeSpace=64MiB" in arguments
    assert MIN_FREE_SPACE == "64MiB"
    assert "writes are refused below 64MiB" in seaweedfs.diagnosis()
