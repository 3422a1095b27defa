"""The layering of the core, checked on the source: each layer imports only layers below it."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import appendtable

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "appendtable"

# layer of each module prefix (first match wins); facade modules are everything else.
LAYERS: list[tuple[str, int]] = [
    ("appendtable.errors", 0),
    ("appendtable.metadata", 1),
    ("appendtable.planning", 2),
    ("appendtable.storage", 3),
    ("appendtable.datafiles", 4),
    ("appendtable.commit", 5),
]
FACADE = 6
# Which layers each layer may import (the design: storage knows nothing of tables).
ALLOWED = {
    0: {0},
    1: {0, 1},
    2: {0, 1, 2},
    3: {0, 3},
    4: {0, 1, 2, 3, 4},
    5: {0, 1, 2, 3, 5},
    6: {0, 1, 2, 3, 4, 5, 6},
}
# Third-party packages allowed per layer.
THIRD_PARTY = {
    0: set(),
    1: {"msgspec", "crcmod"},
    2: {"numpy", "pyarrow"},  # pyarrow/numpy only for the vectorised bucket hash
    3: {"fsspec", "botocore"},  # and, optionally and by name, the other stores' libraries
    4: {"pyarrow", "numpy", "msgspec"},
    5: {"msgspec"},
    6: {"pyarrow", "numpy", "msgspec"},
}


def _module_name(path: Path) -> str:
    relative = path.relative_to(ROOT).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _layer(module: str) -> int:
    for prefix, layer in LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            return layer
    return FACADE


def _imports(tree: ast.AST) -> list[tuple[str, ast.AST]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, node) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, node))
    return found


def _core_files() -> list[Path]:
    return list(CORE.rglob("*.py"))


def test_each_layer_imports_only_layers_below() -> None:
    problems = []
    for path in _core_files():
        module = _module_name(path)
        layer = _layer(module)
        for imported, _node in _imports(ast.parse(path.read_text())):
            root = imported.split(".")[0]
            if root == "appendtable":
                target = _layer(imported)
                if target not in ALLOWED[layer]:
                    problems.append(f"{module} (layer {layer}) imports {imported} (layer {target})")
            elif root == "pyspark":
                problems.append(f"{module} imports pyspark: the core must not")
            elif root in {"pandas", "s3fs", "boto3"}:
                problems.append(f"{module} imports {root}, which is not a core dependency")
            elif root not in _stdlib() and root not in THIRD_PARTY[layer]:
                problems.append(f"{module} (layer {layer}) imports third-party {root}")
    assert problems == []


def _stdlib() -> frozenset[str]:
    return frozenset(sys.stdlib_module_names)


def test_no_function_local_imports_in_the_core() -> None:
    offenders = []
    for path in _core_files():
        tree = ast.parse(path.read_text())
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.Import | ast.ImportFrom):
                    offenders.append(f"{_module_name(path)}:{node.lineno}")
    assert offenders == []


#: Functions allowed to swallow any exception, each with the guarantee that needs it.
BROAD_HANDLERS_ALLOWED = {
    # A landed commit is reported as landed: post-commit maintenance may fail in any way
    # (a bug, a foreign library's error), and that must never reach the committer's caller.
    "appendtable.write:run_maintenance",
    # The same for the Iceberg mirror after a snapshot that did not go through TableCommit
    # (compaction, rollback, schema change): it follows the landed snapshot, never fails it.
    "appendtable.interop:publish_mirror_quietly",
}


def test_no_broad_exception_handlers_in_the_core() -> None:
    offenders = []
    for path in _core_files():
        tree = ast.parse(path.read_text())
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if f"{_module_name(path)}:{function.name}" in BROAD_HANDLERS_ALLOWED:
                continue
            for node in ast.walk(function):
                if (
                    isinstance(node, ast.ExceptHandler)
                    and isinstance(node.type, ast.Name)
                    and node.type.id in ("Exception", "BaseException")
                    and not _reraises(node)
                ):
                    offenders.append(f"{_module_name(path)}:{node.lineno}")
    assert offenders == []


def _reraises(handler: ast.ExceptHandler) -> bool:
    return any(isinstance(n, ast.Raise) and n.exc is None for n in ast.walk(handler))


def test_spark_adapter_uses_only_public_names() -> None:
    public = set(appendtable.__all__)
    problems = []
    for path in (ROOT / "appendtable_spark").rglob("*.py"):
        for imported, node in _imports(ast.parse(path.read_text())):
            if imported.startswith("appendtable.") and not imported.startswith("appendtable_spark"):
                problems.append(f"{path.name} imports internal module {imported}")
            if imported == "appendtable" and isinstance(node, ast.ImportFrom):
                problems.extend(
                    f"{path.name} imports non-public {alias.name}"
                    for alias in node.names
                    if alias.name not in public
                )
    assert problems == []


def test_public_api_is_pinned() -> None:
    expected = {
        "AppendTableError",
        "AtomicCreateUnsupportedError",
        "CommitConflictError",
        "CommitError",
        "CommitKind",
        "CommitMessage",
        "CommitStateUnknownError",
        "CorruptDataFileError",
        "CorruptMetadataError",
        "DataFileMeta",
        "InvalidFilterError",
        "InvalidOptionError",
        "InvalidSchemaError",
        "ObjectExistsError",
        "ObjectNotFoundError",
        "Scan",
        "SchemaMismatchError",
        "Snapshot",
        "SnapshotExpiredError",
        "SnapshotNotFoundError",
        "Split",
        "StorageError",
        "SYSTEM_TABLE_NAMES",  # the system tables, which the Spark adapter exposes
        "SystemTableInfo",
        "Table",
        "TableCommit",
        "TableExistsError",
        "TableNotFoundError",
        "TableWriter",
        "TransientStorageError",
        "UnsupportedFormatVersionError",
        "__version__",
        "create_table",
        "open_table",
        "system_table_info",
        "system_table_schema",
    }
    assert expected <= set(appendtable.__all__)
    for name in appendtable.__all__:
        assert hasattr(appendtable, name), name
    for name in expected - {"__version__", "create_table", "open_table", "CommitKind"}:
        value = getattr(appendtable, name)
        if isinstance(value, type) and issubclass(value, Exception):
            assert issubclass(value, appendtable.AppendTableError), name
