"""The layering of the core, checked on the source: each layer imports only layers below it."""

from __future__ import annotations

import ast
import builtins
import subprocess
import sys
from pathlib import Path

import pyarrow as pa

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
    # fsspec and, by name only, the stores' libraries; pyarrow for each backend's native
    # pyarrow file system (Storage.arrow_filesystem)
    3: {"fsspec", "pyarrow"},
    4: {"pyarrow", "numpy", "msgspec", "pyroaring"},
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
    "appendtable.after_commit.guard:run_maintenance",
    # The same for the Iceberg mirror after a snapshot, also one that did not go through
    # TableCommit (compaction, rollback, schema change): it follows the landed snapshot, never
    # fails it. Both sit in the one guard module of the after-commit package.
    "appendtable.after_commit.guard:publish_mirror_quietly",
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
        "Storage",  # the base class of storage backends, and their registration
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
        "format_schema",
        "format_type",
        "open_table",
        "register_storage",
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


# ---- the error promise ---------------------------------------------------------------------------
# errors.py promises that every error raised on purpose derives from AppendTableError. A raise of
# a builtin exception class (ValueError, TypeError, KeyError, ...) in either package fails the
# test below, unless the raise sits in the body of a ``try`` of the same function whose handler
# catches that class (an internal signal turned into a specific error at once), or its function
# is listed here with the reason it never reaches a caller of the library.
BUILTIN_RAISES_ALLOWED = {
    # Option value parsers: each is the ``parse`` of an OptionDef in OPTIONS, and the only
    # calls of ``OptionDef.parse`` are in parse_options and Options.get, which catch ValueError
    # and raise InvalidOptionError naming the option. No other module calls these functions.
    "appendtable.metadata.options:parse_size",
    "appendtable.metadata.options:parse_duration_ms",
    "appendtable.metadata.options:parse_bool",
    "appendtable.metadata.options:_parse_int",
    "appendtable.metadata.options:_parse_float",
    "appendtable.metadata.options:_parse_directory_name",
    "appendtable.metadata.options:_parse_columns",
    "appendtable.metadata.options:_choice.parse",
    "appendtable.metadata.options:_int_between.parse",
    "appendtable.metadata.options:_parse_stats_mode",
    "appendtable.metadata.options:_parse_snapshot_id",
    "appendtable.metadata.options:_parse_consumer_id",
    # The Spark adapter's option value parsers: each is the ``parse`` (or ``from_keyword``) of
    # a SparkOption, which only SparkOption.value (keyword_value) calls, catching ValueError and
    # raising InvalidOptionError naming the option; _column_names is called only by _columns
    # and _column_keyword, _partition_specs only by _partitions and as a from_keyword.
    "appendtable_spark.options:_text",
    "appendtable_spark.options:_system_table",
    "appendtable_spark.options:_boolean",
    "appendtable_spark.options:_positive",
    "appendtable_spark.options:_identifier",
    "appendtable_spark.options:_column_names",
    "appendtable_spark.options:_json_columns",
    "appendtable_spark.options:_partitions",
    "appendtable_spark.options:_partition_specs",
    "appendtable_spark.options:_choice.parse",
    # A storage hook's failure, raised (as the hooks' OSErrors are) to Storage's operation,
    # which translates it into a TransientStorageError naming the file.
    "appendtable.storage.fsspec_store:FsspecStorage._check_deadline",
    # Literal coercion of temporal filter values: _instant_nanos is called only inside
    # _temporal_nanos's try, which catches TypeError and ValueError and raises
    # InvalidFilterError naming the column; _iso_nanos and _datetime64_nanos are called only
    # by _instant_nanos.
    "appendtable.planning.filters:_instant_nanos",
    "appendtable.planning.filters:_iso_nanos",
    "appendtable.planning.filters:_datetime64_nanos",
    # Not errors: the command line exits with its status (argparse's convention for usage
    # errors, the module's entry point, the demo's check).
    "appendtable.cli:_Parser.error",
    "appendtable.cli.__main__:<module>",
    "appendtable_spark.demo:run",
    # A missing optional dependency is an ImportError (Python's convention, what callers test
    # for); the message names the extra that installs it.
    "appendtable.handoff:optional_module",
}


def _builtin_exception(node: ast.expr | None) -> str | None:
    """The builtin exception class ``node`` raises (``raise X`` or ``raise X(...)``), if any."""
    target = node.func if isinstance(node, ast.Call) else node
    if isinstance(target, ast.Name):
        found = getattr(builtins, target.id, None)
        if isinstance(found, type) and issubclass(found, BaseException):
            return target.id
    return None


def _caught_classes(handler: ast.ExceptHandler) -> list[type[BaseException]]:
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    caught = []
    for name in names:
        found = getattr(builtins, name.id, None) if isinstance(name, ast.Name) else None
        if isinstance(found, type) and issubclass(found, BaseException):
            caught.append(found)
    return caught


def _builtin_raises(
    node: ast.AST, scope: str, caught: tuple[type[BaseException], ...]
) -> list[tuple[str, int, str]]:
    """(function, line, class) of each raise of a builtin exception class under ``node``
    that no enclosing ``try`` of the same function catches."""
    found: list[tuple[str, int, str]] = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            inner = child.name if scope == "<module>" else f"{scope}.{child.name}"
            found.extend(_builtin_raises(child, inner, ()))
        elif isinstance(child, ast.Try | ast.TryStar):
            handled = tuple(c for h in child.handlers for c in _caught_classes(h))
            for statement in child.body:
                found.extend(_builtin_raises(statement, scope, caught + handled))
            for part in (*child.handlers, *child.orelse, *child.finalbody):
                found.extend(_builtin_raises(part, scope, caught))
        else:
            if isinstance(child, ast.Raise):
                name = _builtin_exception(child.exc)
                if name is not None and not issubclass(getattr(builtins, name), caught):
                    found.append((scope, child.lineno, name))
            found.extend(_builtin_raises(child, scope, caught))
    return found


def _package_files() -> list[Path]:
    return [*CORE.rglob("*.py"), *(ROOT / "appendtable_spark").rglob("*.py")]


def test_deliberate_errors_derive_from_appendtable_error() -> None:
    offenders = []
    used = set()
    for path in _package_files():
        module = _module_name(path)
        for function, line, name in _builtin_raises(ast.parse(path.read_text()), "<module>", ()):
            key = f"{module}:{function}"
            if key in BUILTIN_RAISES_ALLOWED:
                used.add(key)
            else:
                offenders.append(f"{key} (line {line}) raises {name}")
    assert offenders == [], "raise an AppendTableError subclass (InvalidArgumentError, ...)"
    assert used == BUILTIN_RAISES_ALLOWED, "allowed entries that no longer raise a builtin"


# ---- no import cycles ---------------------------------------------------------------------------
# Every import statement counts, wherever it sits: ``if TYPE_CHECKING:`` blocks included (a cycle
# hidden from the interpreter is still two modules that cannot be understood one without the
# other). An import of a package's submodule is an edge to that submodule, not to the package.


def _import_graph() -> dict[str, set[str]]:
    files = {_module_name(path): path for path in _package_files()}
    graph: dict[str, set[str]] = {module: set() for module in files}
    for module, path in files.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([base] if base else [])])
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in files else base
                    for alias in node.names
                ]
            else:
                continue
            for target in targets:
                while target and target not in files:  # ``import a.b.c`` of a module a.b
                    target = target.rpartition(".")[0]
                if target and target != module:
                    graph[module].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(graph[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def _cycle_path(graph: dict[str, set[str]], component: list[str]) -> str:
    """One cycle through the component's first module, as ``a -> b -> a``."""
    members = set(component)
    start = component[0]
    paths = {start: [start]}
    queue = [start]
    while queue:
        module = queue.pop(0)
        for target in sorted(graph[module] & members):
            if target == start:
                return " -> ".join([*paths[module], start])
            if target not in paths:
                paths[target] = [*paths[module], target]
                queue.append(target)
    return ", ".join(component)


def test_the_import_graph_has_no_cycle() -> None:
    graph = _import_graph()
    cycles = [
        f"{_cycle_path(graph, component)} (the cycle joins {', '.join(component)})"
        for component in _cycles(graph)
    ]
    assert cycles == [], "import cycles (TYPE_CHECKING imports included)"


def test_the_cycle_check_finds_a_type_only_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycle_path(graph, ["a", "b", "c"]) == "a -> b -> c -> a"
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_importing_the_packages_does_not_import_pyarrow_dataset_or_pandas() -> None:
    """``pyarrow.dataset`` (and with it pandas, a third of a second of CPU) loads on the first
    dataset read only (``datafiles.parquet_format``): every process that imports appendtable
    pays its import, the CLI and each Python process Spark starts to plan or commit a query."""
    code = (
        "import sys, appendtable, appendtable.cli, appendtable_spark; "
        "print(sorted({'pyarrow.dataset', 'pandas'} & set(sys.modules)))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout.strip()
    assert loaded == "[]"


def test_reading_streaming_and_compacting_do_not_import_pandas(tmp_path: Path) -> None:
    """pandas costs a third of a second of CPU to import: a short-lived process that only
    reads (the CLI, a consumer catching up, a compaction job) must not pay it for nothing.
    pyarrow imports it from ``Schema.empty_table`` and ``pyarrow.dataset`` (hence
    ``arrow_schema.empty_table``; tiny local files are read without the dataset scanner).
    (Building arrays from Python objects imports it too: the table is written here.)"""
    table = appendtable.create_table(
        str(tmp_path / "t"), pa.schema([("k", pa.int64()), ("s", pa.string())])
    )
    for i in range(3):
        table.append(pa.table({"k": [i], "s": [str(i)]}))
    table.close()
    code = (
        "import sys, appendtable as at\n"
        "t = at.open_table(sys.argv[1])\n"
        "assert t.scan().to_arrow().num_rows == 3\n"
        "with t.stream(mode='from-snapshot', snapshot_id=1) as r:\n"
        "    assert sum(b.num_rows for b in r.batches(timeout=0)) == 3\n"
        "t.compact(full=True)\n"
        "t.close()\n"
        "print('pandas' in sys.modules)"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "t")],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout.strip()
    assert loaded == "False"
