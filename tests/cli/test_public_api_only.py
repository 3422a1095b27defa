"""The command line is a client of the public API: it imports nothing internal but itself."""

from __future__ import annotations

import ast
from pathlib import Path

import appendtable

CLI = Path(appendtable.__file__).parent / "cli"


def test_cli_uses_only_public_names() -> None:
    public = set(appendtable.__all__)
    problems: list[str] = []
    for path in sorted(CLI.glob("*.py")):
        tree = ast.parse(path.read_text())
        aliases: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == "appendtable":
                        aliases.add(alias.asname or alias.name)
                    elif alias.name.startswith("appendtable."):
                        problems.append(f"{path.name} imports {alias.name}")
            elif isinstance(node, ast.ImportFrom) and node.module:
                module = node.module
                if module == "appendtable":
                    problems.extend(
                        f"{path.name} imports non-public {a.name}"
                        for a in node.names
                        if a.name not in public
                    )
                elif module.startswith("appendtable.") and not module.startswith("appendtable.cli"):
                    problems.append(f"{path.name} imports internal module {module}")
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and node.attr not in public
            ):
                problems.append(f"{path.name} uses non-public appendtable.{node.attr}")
    assert problems == []
    assert len(list(CLI.glob("*.py"))) >= 5
