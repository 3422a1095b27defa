"""docs/system_tables.md is generated from the declarations and current; it describes every
column of every system table."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

import appendtable as at

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_system_tables", DOCS / "gen_system_tables.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_page_is_generated_and_current() -> None:
    generator = _generator()
    current = (DOCS / "system_tables.md").read_text()
    assert current == generator.render(), (
        "docs/system_tables.md is stale: run python docs/gen_system_tables.py"
    )
    assert generator.main(["--check"]) == 0
    for name in at.SYSTEM_TABLE_NAMES:
        section = current.split(f"\n## {name}\n")[1].split("\n## ")[0]
        for field in at.system_table_schema(name):
            assert f"| `{field.name}` | " in section, (name, field.name)


def test_the_check_fails_on_a_stale_page(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    generator = _generator()
    stale = tmp_path / "system_tables.md"
    stale.write_text(generator.render().replace("| `snapshot_id` |", "| `id` |"))
    monkeypatch.setattr(generator, "OUTPUT", stale)
    assert generator.main(["--check"]) == 1
    assert generator.main([]) == 0
    assert generator.main(["--check"]) == 0


def test_types_as_the_docs_write_them() -> None:
    text = _generator().render()
    assert "| `commit_time` | timestamp[ms, UTC], required |" in text
    assert "| `null_value_counts` | map<string, int64>, required |" in text
    assert "| `partition_keys` | list<string>, required |" in text
    assert "| `watermark` | timestamp[ms, UTC] |" in text
