"""The CLI as users run it: the installed console script and ``python -m appendtable.cli``."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

import appendtable as at
from appendtable.cli import build_parser

from .conftest import console_script, run_process

COMMANDS = [
    "create",
    "append",
    "info",
    "snapshots",
    "files",
    "head",
    "scan",
    "tail",
    "compact",
    "expire",
    "remove-orphans",
    "rollback",
    "alter",
    "schema",
    "tag",
    "iceberg",
]
SCHEMA = pa.schema([("user_id", pa.int64()), ("seq", pa.int64())])


def batch(start: int, count: int) -> pa.Table:
    return pa.table(
        {
            "user_id": [i % 4 for i in range(start, start + count)],
            "seq": list(range(start, start + count)),
        }
    )


@pytest.fixture
def queue(tmp_path: Path) -> tuple[str, at.Table]:
    uri = str(tmp_path / "queue")
    table = at.create_table(uri, SCHEMA, options={"bucket": 2, "bucket-key": "user_id"})
    return uri, table


def test_console_script_end_to_end(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"id": i, "name": f"n{i}"}) + "\n" for i in range(5)))
    created = run_process("create", uri, "--schema", "id int64 not null, name string", script=True)
    assert created.code == 0, created.err
    appended = run_process("append", uri, str(data), script=True)
    assert appended.code == 0, appended.err
    assert appended.out == f"{data}: 5 rows -> snapshot 1 (table: 5 rows, 1 file)\n"
    assert at.open_table(uri).scan(filter=[("id", ">=", 3)]).to_arrow().to_pylist() == [
        {"id": 3, "name": "n3"},
        {"id": 4, "name": "n4"},
    ]


def test_exit_codes_and_error_lines_of_a_real_process(tmp_path: Path) -> None:
    missing = run_process("info", str(tmp_path / "nothing"), script=True)
    assert missing.code == 1
    assert missing.err == f"error: no table at {tmp_path / 'nothing'} (no schema/ files)\n"
    bad_ddl = run_process("create", str(tmp_path / "t"), "--schema", "id int65")
    assert bad_ddl.code == 2
    assert bad_ddl.err.startswith("error: --schema: unknown type 'int65' at position 4")
    assert "Traceback" not in bad_ddl.err


def test_help_has_examples_for_every_command() -> None:
    top = run_process("--help", script=True)
    assert top.code == 0
    assert "examples:" in top.out
    for command in COMMANDS:
        assert command in top.out
    result = run_process("tail", "--help")
    assert result.code == 0
    assert "examples:\n  appendtable tail" in result.out


def test_help_of_every_command_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    for command in COMMANDS:
        with pytest.raises(SystemExit):
            parser.parse_args([command, "--help"])
        out = capsys.readouterr().out
        assert f"usage: appendtable {command}" in out
        assert f"examples:\n  appendtable {command}" in out


def test_version() -> None:
    result = run_process("--version", script=True)
    assert (result.code, result.out) == (0, f"appendtable {at.__version__}\n")
    assert Path(console_script()).name == "appendtable"


def test_tail_follows_new_snapshots_and_resumes_with_a_consumer(
    queue: tuple[str, at.Table],
) -> None:
    uri, table = queue
    table.append(batch(0, 4))
    command = [sys.executable, "-m", "appendtable.cli", "tail", uri, "--consumer-id", "c1"]
    command += ["--format", "jsonl", "--poll", "50ms", "--max-units", "2"]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as tail:
        assert tail.stdout is not None
        first = [json.loads(tail.stdout.readline()) for _ in range(4)]  # the initial full read
        table.append(batch(4, 3))  # lands while tail is running
        second = [json.loads(tail.stdout.readline()) for _ in range(3)]
        assert tail.wait(timeout=60) == 0
        assert tail.stderr is not None and tail.stderr.read() == ""
    assert sorted(r["seq"] for r in first) == [0, 1, 2, 3]
    assert sorted(r["seq"] for r in second) == [4, 5, 6]
    assert table.consumers() == {"c1": 3}  # progress committed after each printed unit
    table.append(batch(7, 2))
    resumed = run_process(
        "tail",
        uri,
        "--consumer-id",
        "c1",
        "--format",
        "csv",
        "--idle-exit",
        "0.3",
        "--poll",
        "50ms",
    )
    assert resumed.code == 0, resumed.err
    lines = resumed.out.splitlines()
    assert lines[0] == "user_id,seq"
    assert sorted(int(line.split(",")[1]) for line in lines[1:]) == [7, 8]  # nothing repeated


def _interactive_sigint() -> None:
    """Ctrl-C as a terminal delivers it: a job started in the background by a non-interactive
    shell (as CI runners do) inherits SIGINT *ignored*, and Python keeps it ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_stops_tail_cleanly(queue: tuple[str, at.Table]) -> None:
    uri, table = queue
    table.append(batch(0, 2))
    command = [sys.executable, "-m", "appendtable.cli", "tail", uri, "--consumer-id", "c2"]
    command += ["--format", "csv", "--poll", "50ms"]
    with subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_interactive_sigint,
    ) as tail:
        try:
            assert tail.stdout is not None and tail.stderr is not None
            assert tail.stdout.readline() == "user_id,seq\n"
            rows = [tail.stdout.readline() for _ in range(2)]
            deadline = time.monotonic() + 30
            while table.consumers().get("c2") != 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            tail.send_signal(signal.SIGINT)
            assert tail.wait(timeout=30) == 0
        finally:
            tail.kill()  # no-op once it exited; never leave the context manager waiting forever
        err = tail.stderr.read()
    assert sorted(rows) == ["0,0\n", "1,1\n"]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert table.consumers() == {"c2": 2}


def test_broken_pipe_is_quiet(queue: tuple[str, at.Table]) -> None:
    uri, table = queue
    table.append(batch(0, 50_000))
    command = [sys.executable, "-m", "appendtable.cli", "scan", uri, "--format", "csv"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as scan:
        assert scan.stdout is not None and scan.stderr is not None
        assert scan.stdout.readline() == b"user_id,seq\n"
        scan.stdout.close()  # like `| head -1`
        code = scan.wait(timeout=60)
        err = scan.stderr.read()
    assert code == 0
    assert err == b""


NOISY_STORE = """
import logging, sys
import appendtable as at
import appendtable.cli


def unreachable(uri, storage_options=None):
    try:
        raise ConnectionRefusedError("connect call failed")
    except ConnectionRefusedError:  # as gcsfs logs every request out of retries
        logging.getLogger("gcsfs").exception("_request out of retries on exception")
        logging.getLogger("botocore").warning("endpoint unreachable")
    raise at.TransientStorageError("list failed for gs://lake/t/schema: refused")


at.open_table = unreachable
sys.exit(appendtable.cli.main(sys.argv[1:]))
"""


@pytest.mark.parametrize("debug", [False, True])
def test_a_storage_clients_own_log_stays_out_of_the_one_error_line(debug: bool) -> None:
    """Found by a docs-only hunt: with GCS unreachable, gcsfs's logger printed a traceback per
    request before the CLI's ``error:`` line; cli.md promises one line, tracebacks only with
    ``--debug``."""
    args = ["--debug"] if debug else []
    done = subprocess.run(
        [sys.executable, "-c", NOISY_STORE, *args, "scan", "gs://lake/t", "--count"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    if debug:
        assert "out of retries" in done.stderr and "Traceback" in done.stderr
    else:
        assert done.stderr.splitlines() == ["error: list failed for gs://lake/t/schema: refused"], (
            done.stderr
        )
