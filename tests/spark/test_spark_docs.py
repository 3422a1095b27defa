"""docs/spark.md: its option table is generated from the adapter's registry and current, and
its samples marked ``<!-- test -->`` run, in order, in one namespace holding ``spark``."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.test_readme import extract

pyspark = pytest.importorskip("pyspark")
appendtable_spark = pytest.importorskip("appendtable_spark")

from appendtable_spark import options as registry  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "spark.md"


def _generator() -> ModuleType:
    path = ROOT / "docs" / "gen_spark_options.py"
    spec = importlib.util.spec_from_file_location("gen_spark_options", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_option_table_is_generated_and_current() -> None:
    generator = _generator()
    page = PAGE.read_text()
    assert page == generator.render(page), "docs/spark.md is stale: run docs/gen_spark_options.py"
    assert generator.main(["--check"]) == 0
    for option in registry.OPTIONS.values():
        assert f"| `{option.name}` |" in page


def test_the_check_fails_on_a_stale_table(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    generator = _generator()
    stale = tmp_path / "spark.md"
    stale.write_text(PAGE.read_text().replace("| `mergeSchema` |", "| `mergeSchemas` |"))
    monkeypatch.setattr(generator, "OUTPUT", stale)
    assert generator.main(["--check"]) == 1
    assert generator.main([]) == 0
    assert generator.main(["--check"]) == 0


@pytest.mark.spark
def test_the_marked_samples_run(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    samples = [
        s for s in extract(PAGE.read_text()) if s.language == "python" and s.marker == "test"
    ]
    assert len(samples) >= 2
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__spark_docs__", "spark": spark}
    for sample in samples:
        code = compile("\n" * (sample.line - 1) + sample.code, str(PAGE), "exec")
        exec(code, namespace)
