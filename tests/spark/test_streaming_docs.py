"""The runnable samples of docs/spark.md's Structured Streaming section (marked
``<!-- test -->``) run against a real Spark session, each on its own, with ``spark`` defined."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.test_readme import extract

pytestmark = pytest.mark.spark
pytest.importorskip("pyspark")

PAGE = Path(__file__).resolve().parents[2] / "docs" / "spark.md"


def _section_samples() -> list[Any]:
    text = PAGE.read_text()
    start = text.index("## Structured Streaming")
    end = text.index("\n## ", start + 1)
    offset = text[:start].count("\n")
    return [
        (sample, offset)
        for sample in extract(text[start:end])
        if sample.language == "python" and sample.marker == "test"
    ]


SAMPLES = _section_samples()


def test_the_streaming_section_has_runnable_samples() -> None:
    assert len(SAMPLES) >= 3


@pytest.mark.parametrize("index", range(len(SAMPLES)))
def test_streaming_samples_run(spark: Any, index: int) -> None:
    sample, offset = SAMPLES[index]
    code = compile("\n" * (offset + sample.line - 1) + sample.code, str(PAGE), "exec")
    exec(code, {"__name__": "__spark_docs__", "spark": spark})
