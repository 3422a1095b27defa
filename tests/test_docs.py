"""The docs: options.md is generated and current, samples run, links resolve."""

from __future__ import annotations

import argparse
import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

import appendtable
from appendtable.cli import build_parser
from appendtable.metadata import options as registry

from .test_readme import extract, run_python

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = [
    "python.md",
    "queue.md",
    "maintenance.md",
    "cli.md",
    "errors.md",
    "options.md",
    "system_tables.md",
]
_LINK = re.compile(r"\]\(([^)#\s]+)(#[^)]*)?\)")


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_options", DOCS / "gen_options.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_options_md_is_generated_and_current() -> None:
    generator = _generator()
    current = (DOCS / "options.md").read_text()
    assert current == generator.render(), "docs/options.md is stale: run python docs/gen_options.py"
    assert generator.main(["--check"]) == 0
    for key in registry.OPTIONS:
        assert f"| `{key}` |" in current


def test_the_check_fails_on_a_stale_page(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    generator = _generator()
    stale = tmp_path / "options.md"
    stale.write_text(generator.render().replace("| `bucket` |", "| `buckets` |"))
    monkeypatch.setattr(generator, "OUTPUT", stale)
    assert generator.main(["--check"]) == 1
    assert generator.main([]) == 0  # regenerates
    assert generator.main(["--check"]) == 0


def test_option_rendering() -> None:
    generator = _generator()
    text = generator.render()
    assert "| `target-file-size` | size | `256 MB` |" in text
    assert "| `snapshot.time-retained` | duration | `1 h` |" in text
    assert "| `write-only` | boolean | `false` |" in text
    assert "| `file.compression` | one of `zstd`, `snappy`" in text
    assert "(*fixed*)" in text.split("| `bucket` |")[1].splitlines()[0]


@pytest.mark.parametrize("page", PAGES)
def test_pages_exist_and_links_resolve(page: str) -> None:
    text = (DOCS / page).read_text()
    assert text.startswith("# ")
    for target, _anchor in _LINK.findall(text):
        if target.startswith(("http://", "https://")):
            continue
        assert (DOCS / target).exists(), f"{page} links to missing {target}"


def test_readme_links_resolve() -> None:
    for target, _anchor in _LINK.findall((ROOT / "README.md").read_text()):
        if not target.startswith(("http://", "https://")):
            assert (ROOT / target).exists(), f"README links to missing {target}"


@pytest.mark.parametrize("page", ["python.md", "queue.md", "maintenance.md"])
def test_python_samples_of_the_guides_run(
    page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    samples = [s for s in extract((DOCS / page).read_text()) if s.language == "python" and s.runs]
    assert samples
    monkeypatch.chdir(tmp_path)
    run_python(samples, DOCS / page)


def test_errors_page_lists_every_public_error() -> None:
    text = (DOCS / "errors.md").read_text()
    errors = [
        name
        for name in appendtable.__all__
        if isinstance(getattr(appendtable, name), type)
        and issubclass(getattr(appendtable, name), BaseException)
    ]
    assert len(errors) >= 19
    for name in errors:
        assert f"`{name}`" in text, f"docs/errors.md does not explain {name}"


def test_cli_page_documents_every_command() -> None:
    text = (DOCS / "cli.md").read_text()
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name in commands.choices:
        assert f"`{name} URI" in text, f"docs/cli.md does not document '{name}'"
