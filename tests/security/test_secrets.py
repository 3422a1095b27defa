"""Secrets never reach the output: ``appendtable --debug`` raises only the project's own
loggers (storage clients' debug logs carry access keys and session tokens), and the API's
messages, reprs and logs name no credential, on every store.

Each store's credentials (S3 key and secret, the Azure account key, a GCS token) are planted in
the storage options, and everything the CLI and the API print is searched for them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

API_SCRIPT = textwrap.dedent(
    """
    import json, logging, sys
    import pyarrow as pa
    import appendtable as at
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("appendtable").setLevel(logging.DEBUG)
    uri, options = sys.argv[1], json.loads(sys.argv[2])
    schema = pa.schema([("k", pa.int64()), ("v", pa.string())])
    table = at.create_table(uri, schema, storage_options=options,
                            options={"metadata.iceberg.storage": "table-location"})
    table.append(pa.table({"k": [1, 2], "v": ["a", "b"]}, schema=schema))
    print(repr(table), table._repr_html_(), repr(table.scan()), table.files().to_pylist())
    print(table.scan().to_arrow().to_pylist(), table.iceberg_metadata_location())
    print(repr(table.expire_snapshots(dry_run=True)), repr(table.remove_orphan_files()))
    for attempt in (lambda: table.scan(snapshot_id=99),
                    lambda: at.open_table(uri + "-missing", storage_options=options),
                    lambda: table.scan(filter=[("nope", "=", 1)])):
        try:
            attempt()
        except at.AppendTableError as exc:
            print(type(exc).__name__, exc, repr(exc))
    """
)

#: The CLI commands, run one after another by ``appendtable.cli.main`` in one process (a
#: process each cost most of this module's time); every command's output goes to the same
#: stdout and stderr, which are searched as one text.
CLI_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from appendtable.cli import main
    for argv in json.loads(sys.argv[1]):
        code = main(argv)
        sys.stdout.flush()
        sys.stderr.flush()
        if code not in (0, 1):
            print(argv[-2:], "exited with", code, file=sys.stderr)
            sys.exit(3)
    print("every command ran")
    """
)


def _secrets(options: dict[str, Any]) -> list[str]:
    """The secret values among storage options (and inside a connection string)."""
    found = []
    for key, value in options.items():
        secret = key in ("key", "secret", "token", "account_key", "sas_token", "password")
        if secret and isinstance(value, str) and value not in ("anon", ""):
            found.append(value)
        if key == "connection_string":
            found.extend(re.findall(r"AccountKey=([^;]+)", value))
    return found


def _run(argv: list[str], env_extra: dict[str, str] | None = None) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env_extra or {})}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    assert done.returncode in (0, 1), done.stderr
    return done.stdout + done.stderr


def _check(uri: str, options: dict[str, Any], tmp_path: Path, *, cli: bool) -> None:
    secrets = _secrets(options)
    planted = {
        "AWS_ACCESS_KEY_ID": "AKIAPLANTEDCANARY0001",
        "AWS_SECRET_ACCESS_KEY": "planted/secret/canary",
        "AWS_SESSION_TOKEN": "planted-session-token-canary",
    }
    if uri.startswith("s3://"):
        planted = {}  # the fixture's own key and secret are the planted ones
    secrets.extend(planted.values())
    outputs = [_run([sys.executable, "-c", API_SCRIPT, uri, json.dumps(options)], planted)]
    if cli:
        data = tmp_path / "rows.jsonl"
        data.write_text('{"k": 3, "v": "c"}\n')
        storage = [
            item
            for k, v in options.items()
            for item in ("--storage-option", f"{k}={v if isinstance(v, str) else json.dumps(v)}")
        ]
        commands = [
            ["--debug", *storage, *argv]
            for argv in (
                ["append", uri, str(data)],
                ["scan", uri],
                ["info", uri],
                ["snapshots", uri],
                ["files", uri],
                ["expire", uri, "--dry-run"],
                ["remove-orphans", uri],
                ["iceberg", uri],
                ["scan", uri, "--snapshot", "99"],
            )
        ]
        outputs.append(_run([sys.executable, "-c", CLI_SCRIPT, json.dumps(commands)], planted))
        assert "every command ran" in outputs[-1], outputs[-1]
    text = "\n".join(outputs)
    # the API script ran to its end: each of its three refused calls printed its error
    assert "Traceback" not in outputs[0], outputs[0]
    for error in ("SnapshotNotFoundError", "TableNotFoundError", "InvalidFilterError"):
        assert error in outputs[0], (error, outputs[0])
    for secret in secrets:
        assert secret not in text, f"a credential appears in the output: {secret[:4]}..."
    assert not re.search(r"(?i)authorization['\":= ]+\S", text)
    assert not re.search(r"(?i)x-amz-security-token['\":= ]+\S", text)
    assert "DEBUG" not in text or "DEBUG appendtable" in text  # only our loggers debug


def test_no_credentials_in_output_on_local_disk(tmp_path: Path) -> None:
    _check(str(tmp_path / "t"), {}, tmp_path, cli=True)


def test_no_credentials_in_output_on_memory(tmp_path: Path) -> None:
    _check(f"memory://secrets/{uuid.uuid4().hex}", {}, tmp_path, cli=False)


def test_no_credentials_in_output_on_object_stores(tmp_path: Path, cloud: Any) -> None:
    _check(cloud.uri, dict(cloud.storage_options), tmp_path, cli=True)
