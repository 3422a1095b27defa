"""Every code sample in the README runs.

```python blocks are executed in order in one namespace, in a temporary directory, so each
sample may use what an earlier one defined. ```bash blocks that call the ``appendtable``
command are run too (one bash script per block, in the same directory). A block is skipped when
the line before its fence is ``<!-- no-test -->``; Python blocks that mention pyspark are
skipped unless marked ``<!-- test -->`` (and then only when pyspark is installed).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
_FENCE = re.compile(r"^```(\w*)\s*$")


@dataclass(frozen=True)
class Sample:
    language: str
    code: str
    line: int  # 1-based line of the first code line
    marker: str | None  # "test", "no-test" or None

    @property
    def runs(self) -> bool:
        if self.marker == "no-test":
            return False
        if self.language == "python":
            return "pyspark" not in self.code or self.marker == "test"
        if self.language in ("bash", "sh", "shell"):
            return self.marker == "test" or any(
                line.strip().startswith("appendtable ") for line in self.code.splitlines()
            )
        return False


def extract(text: str) -> list[Sample]:
    """The fenced code blocks of a Markdown text, with their opt-in/opt-out markers."""
    lines = text.splitlines()
    samples: list[Sample] = []
    index = 0
    while index < len(lines):
        match = _FENCE.match(lines[index])
        if match is None or not match.group(1):
            index += 1
            continue
        previous = next(
            (lines[i].strip() for i in range(index - 1, -1, -1) if lines[i].strip()), ""
        )
        marker = {"<!-- no-test -->": "no-test", "<!-- test -->": "test"}.get(previous)
        end = index + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        code = "\n".join(lines[index + 1 : end]) + "\n"
        samples.append(Sample(match.group(1), code, index + 2, marker))
        index = end + 1
    return samples


def run_python(samples: list[Sample], source: Path) -> None:
    namespace: dict[str, object] = {"__name__": "__readme__"}
    for sample in samples:
        if sample.code.count("pyspark") and sample.marker == "test":
            pytest.importorskip("pyspark")
        # Pad with new lines so tracebacks point at the right line of the Markdown file.
        code = compile("\n" * (sample.line - 1) + sample.code, str(source), "exec")
        exec(code, namespace)


def run_bash(sample: Sample, source: Path, cwd: Path) -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", sample.code],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, (
        f"{source.name}:{sample.line}: bash sample failed ({done.returncode}):\n"
        f"{sample.code}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    )


def test_extractor_markers_and_languages() -> None:
    text = (
        "intro\n```python\na = 1\n```\n<!-- no-test -->\n```python\nboom()\n```\n"
        "```python\nimport pyspark\n```\n<!-- test -->\n\n```python\nb = 2  # pyspark\n```\n"
        "```bash\nmake demo\n```\n```bash\nappendtable --version\n```\n```\nplain\n```\n"
    )
    samples = extract(text)
    assert [(s.language, s.line, s.marker, s.runs) for s in samples] == [
        ("python", 3, None, True),
        ("python", 7, "no-test", False),
        ("python", 10, None, False),
        ("python", 15, "test", True),
        ("bash", 18, None, False),
        ("bash", 21, None, True),
    ]
    assert samples[0].code == "a = 1\n"


def test_readme_python_samples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    samples = [s for s in extract(README.read_text()) if s.language == "python" and s.runs]
    assert len(samples) >= 4
    monkeypatch.chdir(tmp_path)
    run_python(samples, README)


def test_readme_cli_samples_run(tmp_path: Path) -> None:
    samples = [s for s in extract(README.read_text()) if s.language == "bash" and s.runs]
    assert samples, "the README's CLI section has a runnable bash sample"
    for sample in samples:
        run_bash(sample, README, tmp_path)
