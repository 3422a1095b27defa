"""How tables, scans, stream units and maintenance results show up in a console or notebook.

``__repr__`` gives one short line (never a dump of every file); ``_repr_html_`` gives a small
HTML card for Jupyter. Every value that comes from data or metadata is HTML-escaped. Reprs never
raise: a table whose latest snapshot cannot be read says so instead.

The metadata structs (``Snapshot``, ``Split``, ``CompactionTask``) format themselves in
``appendtable.metadata.models``: that layer stays importable without pyarrow and must not import
this facade module. The facade objects rendered here (``Table``, ``StreamUnit``,
``CompactionPlan``, ``ExpireResult``, ...) are described by the small protocols below, never
imported: their modules import this one, and no import cycle joins them.
"""

from __future__ import annotations

import datetime as dt
import html
import json
from collections.abc import Iterable, Sequence
from typing import Protocol, assert_never

from appendtable._state import SchemaView, TableState
from appendtable.datafiles.arrow_schema import arrow_schema
from appendtable.errors import AppendTableError
from appendtable.metadata.models import CommitKind, CompactionTask, Snapshot, Split
from appendtable.metadata.types import FieldSpec
from appendtable.metadata.values import to_python
from appendtable.planning.filters import Filter, Predicate
from appendtable.planning.operators import FilterOperands, filter_operator
from appendtable.schema_text import format_field

__all__ = [
    "expire_html",
    "expire_repr",
    "filter_text",
    "format_bytes",
    "format_ms",
    "orphan_html",
    "orphan_repr",
    "plan_html",
    "plan_repr",
    "progress_text",
    "scan_html",
    "scan_repr",
    "table_html",
    "table_repr",
    "unit_html",
    "unit_repr",
]


# ---- what is rendered ---------------------------------------------------------------------------


class ShownTable(Protocol):
    """A table handle, as its card shows it (``appendtable.table.Table``)."""

    @property
    def uri(self) -> str: ...
    @property
    def partition_by(self) -> list[str]: ...
    @property
    def bucket(self) -> int: ...
    @property
    def bucket_key(self) -> list[str]: ...
    def latest_snapshot(self) -> Snapshot | None: ...


class _Position(Protocol):
    def to_json(self) -> str: ...


class ShownUnit(Protocol):
    """A unit of a stream (``appendtable.stream.StreamUnit``)."""

    @property
    def snapshot_id(self) -> int: ...
    @property
    def full(self) -> bool: ...
    @property
    def commit_kind(self) -> CommitKind: ...
    @property
    def splits(self) -> Sequence[Split]: ...
    @property
    def watermark(self) -> int | None: ...
    @property
    def next_position(self) -> _Position: ...
    @property
    def row_count(self) -> int: ...
    @property
    def file_count(self) -> int: ...


class ShownExpiration(Protocol):
    """What an expiration removed (``appendtable.maintenance.ExpireResult``)."""

    @property
    def expired_snapshots(self) -> Sequence[int]: ...
    @property
    def deleted_data_files(self) -> Sequence[str]: ...
    @property
    def deleted_metadata_files(self) -> Sequence[str]: ...
    @property
    def expired_consumers(self) -> Sequence[str]: ...
    @property
    def expired_groups(self) -> Sequence[str]: ...
    @property
    def earliest_snapshot(self) -> int | None: ...
    @property
    def dry_run(self) -> bool: ...


class ShownOrphans(Protocol):
    """What an orphan-file removal found (``appendtable.orphans.OrphanResult``)."""

    @property
    def files(self) -> Sequence[str]: ...
    @property
    def bytes(self) -> int: ...
    @property
    def dry_run(self) -> bool: ...
    @property
    def not_table_files(self) -> Sequence[str]: ...


class ShownDelete(Protocol):
    """What a delete did (``appendtable.deletes.DeleteResult``)."""

    @property
    def rows(self) -> int: ...
    @property
    def files_touched(self) -> int: ...
    @property
    def files_removed(self) -> int: ...
    @property
    def files_rewritten(self) -> int: ...
    @property
    def vectors_written(self) -> int: ...
    @property
    def mode(self) -> str: ...
    @property
    def dry_run(self) -> bool: ...
    @property
    def snapshot(self) -> Snapshot | None: ...


class ShownPurge(Protocol):
    """What a purge did (``appendtable.purge.PurgeResult``)."""

    @property
    def files_rewritten(self) -> int: ...
    @property
    def rows_dropped(self) -> int: ...
    @property
    def expired_snapshots(self) -> Sequence[int]: ...
    @property
    def deleted_files(self) -> Sequence[str]: ...
    @property
    def tags_kept(self) -> Sequence[str]: ...
    @property
    def young_orphans(self) -> Sequence[str]: ...
    @property
    def dry_run(self) -> bool: ...
    @property
    def snapshot(self) -> Snapshot | None: ...


class ShownPlan(Protocol):
    """A compaction plan (``appendtable.compaction.CompactionPlan``)."""

    @property
    def snapshot_id(self) -> int | None: ...
    @property
    def tasks(self) -> Sequence[CompactionTask]: ...


class ShownProgress(Protocol):
    """How far a compaction got (``appendtable.compaction.CompactionProgress``)."""

    @property
    def tasks_done(self) -> int: ...
    @property
    def tasks_total(self) -> int: ...
    @property
    def files_read(self) -> int: ...
    @property
    def bytes_read(self) -> int: ...
    @property
    def files_written(self) -> int: ...
    @property
    def bytes_written(self) -> int: ...


#: Lists in HTML cards (files of a result, tasks of a plan) show at most this many items.
MAX_LISTED = 20
#: Columns shown in a table's HTML card (a thousand-column table stays a small card).
MAX_COLUMNS = 50
#: Values of an ``in`` list (and OR clauses) shown in a filter's text, and the characters of one.
MAX_VALUES = 10
MAX_VALUE_CHARS = 60
_STYLE = "border-collapse:collapse;margin:2px 0"
_TH = "text-align:left;padding:1px 8px 1px 0;vertical-align:top;font-weight:600"
_TD = "text-align:left;padding:1px 8px 1px 0;vertical-align:top"


# ---- plain text ---------------------------------------------------------------------------------


def format_bytes(size: int) -> str:
    """``1536`` -> ``1.5 KiB``."""
    if abs(size) < 1024:
        return f"{int(size)} B"
    value = size / 1024
    for unit in ("KiB", "MiB", "GiB"):
        if abs(value) < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def format_ms(epoch_ms: int | None) -> str:
    """Epoch milliseconds as ``2024-05-01 10:00:00.123 UTC`` (the number itself if out of
    range)."""
    if epoch_ms is None:
        return "-"
    try:
        moment = dt.datetime.fromtimestamp(epoch_ms / 1000, tz=dt.UTC)
    except (OverflowError, OSError, ValueError):
        return str(epoch_ms)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d} UTC"


def _range(ids: Sequence[int]) -> str:
    if not ids:
        return "none"
    if len(ids) == 1:
        return str(ids[0])
    if list(ids) == list(range(ids[0], ids[0] + len(ids))):
        return f"{ids[0]}..{ids[-1]}"
    return ", ".join(str(i) for i in ids)


def _cut(text: str, limit: int = MAX_VALUE_CHARS * 2) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def columns_text(fields: Sequence[FieldSpec]) -> str:
    """Columns as DDL (``schema_text``: names quoted where needed, nested fields with their
    names and nullability), each with its doc as a JSON string, ``(doc: "...")``, if it has
    one; comma-separated (schema history). Without docs, the DDL the command line reads."""
    return ", ".join(
        format_field(column) + (f" (doc: {json.dumps(f.doc)})" if f.doc else "")
        for f, column in zip(fields, arrow_schema(fields), strict=True)
    )


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}" if count == 1 else f"{count:,} {word}s"


def _value_text(value: object) -> str:
    """Strings and bytes quoted, everything else as people write it (dates in ISO form); cut
    at ``MAX_VALUE_CHARS``."""
    if isinstance(value, str | bytes):
        text = repr(value)
    elif isinstance(value, dt.datetime):
        text = value.isoformat(sep=" ")
    else:
        text = str(value)
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"


def _python(value: object, predicate: Predicate) -> object:
    try:
        return to_python(value, predicate.type)
    except (OverflowError, ValueError):  # beyond what datetime can hold: the stored value
        return value


def _predicate_text(predicate: Predicate) -> str:
    op = predicate.op
    name = predicate.name
    operands = filter_operator(op).operands
    shown = predicate.values[:MAX_VALUES]
    values = [_value_text(_python(v, predicate)) for v in shown]
    match operands:
        case FilterOperands.NONE:
            return f"{name} {op}"
        case FilterOperands.ONE:
            return f"{name} {op} {values[0]}"
        case FilterOperands.LIST:
            more = len(predicate.values) - len(shown)
            listed = ", ".join(values) + (f", … {more:,} more" if more else "")
            return f"{name} {op} ({listed})"
        case _:
            assert_never(operands)


def filter_text(row_filter: Filter | None) -> str:
    """A parsed filter as ``a = 1 AND b > 2 OR c is null`` (values in Python form)."""
    if row_filter is None:
        return "none"
    shown = row_filter.clauses[:MAX_VALUES]
    clauses = [" AND ".join(_predicate_text(p) for p in clause) for clause in shown]
    if len(clauses) == 1:
        return clauses[0]
    more = len(row_filter.clauses) - len(shown)
    return " OR ".join(f"({clause})" for clause in clauses) + (
        f" OR … {more:,} more clauses" if more else ""
    )


def _snapshot_text(snapshot: Snapshot) -> str:
    text = (
        f"{snapshot.id} {snapshot.kind.value} at {format_ms(snapshot.time_ms)}, "
        f"{_plural(snapshot.total_record_count, 'row')}, "
        f"{_plural(snapshot.total_file_count, 'file')}"
    )
    if snapshot.watermark is not None:
        text += f", watermark {format_ms(snapshot.watermark)}"
    return text


def _latest(table: ShownTable) -> tuple[Snapshot | None, str | None]:
    """The latest snapshot, or an error message instead of raising (reprs never raise)."""
    try:
        return table.latest_snapshot(), None
    except AppendTableError as exc:
        return None, f"unavailable ({type(exc).__name__}: {exc})"


def _view(state: TableState, snapshot: Snapshot | None, problem: str | None) -> SchemaView:
    """The schema version of the latest snapshot, without reading anything more (reprs never
    raise: with the latest snapshot unreadable, the one the handle last knew)."""
    if problem is None and snapshot is not None:
        try:
            return state.view_at(snapshot)
        except AppendTableError:
            pass
    return state.view


def _layout_text(table: ShownTable) -> str:
    if table.bucket > 0:
        return f"{table.bucket} buckets on {', '.join(table.bucket_key)}"
    return "scalable (bucket = -1)"


def table_repr(table: ShownTable, state: TableState) -> str:
    snapshot, problem = _latest(table)
    if problem is not None:
        latest = problem
    elif snapshot is None:
        latest = "empty"
    else:
        latest = (
            f"snapshot {snapshot.id} {snapshot.kind.value}, "
            f"{_plural(snapshot.total_record_count, 'row')}, "
            f"{_plural(snapshot.total_file_count, 'file')}"
        )
    columns = len(_view(state, snapshot, problem).arrow_schema)
    return (
        f"Table({table.uri!r}, {_plural(columns, 'column')}, "
        f"partition_by={_cut(str(table.partition_by))}, {_layout_text(table)}, {latest})"
    )


def scan_repr(
    snapshot: Snapshot | None,
    columns: Sequence[str] | None,
    row_filter: Filter | None,
    splits: Sequence[Split] | None,
) -> str:
    text = (
        f"Scan(snapshot={snapshot.id if snapshot else None}, "
        f"columns={_cut(str(columns), MAX_VALUE_CHARS * 2)}, "
        f"filter={filter_text(row_filter)}"
    )
    if splits is not None:
        text += f", planned: {_splits_text(splits)}"
    return text + ")"


def _splits_text(splits: Sequence[Split]) -> str:
    files = sum(len(s.files) for s in splits)
    rows = sum(s.row_count for s in splits)
    return f"{_plural(len(splits), 'split')}, {_plural(files, 'file')}, {_plural(rows, 'row')}"


def unit_repr(unit: ShownUnit) -> str:
    watermark = "" if unit.watermark is None else f", watermark={format_ms(unit.watermark)}"
    return (
        f"StreamUnit(snapshot={unit.snapshot_id} {unit.commit_kind.value}, "
        f"{'full' if unit.full else 'delta'}, {_splits_text(unit.splits)}{watermark})"
    )


def expire_repr(result: ShownExpiration) -> str:
    verb = "would expire" if result.dry_run else "expired"
    return (
        f"ExpireResult({verb} snapshots {_range(result.expired_snapshots)}, "
        f"{_plural(len(result.deleted_data_files), 'data file')}, "
        f"{_plural(len(result.deleted_metadata_files), 'metadata file')}, "
        f"{_plural(len(result.expired_consumers), 'consumer')}"
        + (f", {_plural(len(result.expired_groups), 'group')}" if result.expired_groups else "")
        + f"; earliest={result.earliest_snapshot})"
    )


def orphan_repr(result: ShownOrphans) -> str:
    verb = "would delete" if result.dry_run else "deleted"
    foreign = (
        f", {_plural(len(result.not_table_files), 'path')} not the table's"
        if result.not_table_files
        else ""
    )
    return (
        f"OrphanResult({verb} {_plural(len(result.files), 'file')}, "
        f"{format_bytes(result.bytes)}{foreign})"
    )


def delete_repr(result: ShownDelete) -> str:
    verb = "would delete" if result.dry_run else "deleted"
    how = (
        f"{_plural(result.vectors_written, 'vector')} written"
        if result.mode == "deletion-vectors"
        else f"{_plural(result.files_rewritten, 'file')} rewritten"
    )
    snapshot = f", snapshot {result.snapshot.id}" if result.snapshot is not None else ""
    return (
        f"DeleteResult({verb} {_plural(result.rows, 'row')} in "
        f"{_plural(result.files_touched, 'file')}: {how}, "
        f"{result.files_removed:,} removed, {result.mode}{snapshot})"
    )


def purge_repr(result: ShownPurge) -> str:
    verb = "would purge" if result.dry_run else "purged"
    snapshot = f", snapshot {result.snapshot.id}" if result.snapshot is not None else ""
    kept = (
        f", tags kept with deleted rows: {', '.join(result.tags_kept)}" if result.tags_kept else ""
    )
    young = (
        f", {_plural(len(result.young_orphans), 'young orphan')} left"
        if result.young_orphans
        else ""
    )
    return (
        f"PurgeResult({verb}: {_plural(result.files_rewritten, 'file')} rewritten "
        f"({_plural(result.rows_dropped, 'deleted row')} dropped), "
        f"{_plural(len(result.expired_snapshots), 'snapshot')} expired, "
        f"{_plural(len(result.deleted_files), 'file')} deleted{kept}{young}{snapshot})"
    )


def plan_repr(plan: ShownPlan) -> str:
    files = sum(len(task.files) for task in plan.tasks)
    size = sum(task.file_size for task in plan.tasks)
    return (
        f"CompactionPlan(snapshot={plan.snapshot_id}, {_plural(len(plan.tasks), 'task')}, "
        f"{_plural(files, 'file')}, {format_bytes(size)})"
    )


def progress_text(progress: ShownProgress) -> str:
    return (
        f"{progress.tasks_done}/{progress.tasks_total} tasks: "
        f"{_plural(progress.files_read, 'file')} ({format_bytes(progress.bytes_read)}) read, "
        f"{_plural(progress.files_written, 'file')} ({format_bytes(progress.bytes_written)}) "
        "written"
    )


# ---- HTML ---------------------------------------------------------------------------------------


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _card(title: str, subtitle: str, rows: Iterable[tuple[str, str]]) -> str:
    """A titled two-column table; ``rows`` hold (escaped label, already escaped HTML)."""
    body = "".join(
        f'<tr><th style="{_TH}">{label}</th><td style="{_TD}">{cell}</td></tr>'
        for label, cell in rows
    )
    return (
        f'<div class="appendtable-repr"><strong>{_e(title)}</strong> <code>{_e(subtitle)}</code>'
        f'<table style="{_STYLE}">{body}</table></div>'
    )


def _grid(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A small data table, every cell escaped."""
    head = "".join(f'<th style="{_TH}">{_e(h)}</th>' for h in header)
    body = "".join(
        "<tr>" + "".join(f'<td style="{_TD}">{_e(cell)}</td>' for cell in row) + "</tr>"
        for row in rows
    )
    return f'<table style="{_STYLE}"><tr>{head}</tr>{body}</table>'


def _listing(items: Sequence[str]) -> str:
    """Up to MAX_LISTED items in a collapsed list."""
    if not items:
        return "none"
    shown = "".join(f"<li><code>{_e(item)}</code></li>" for item in items[:MAX_LISTED])
    more = f"<li>… {len(items) - MAX_LISTED:,} more</li>" if len(items) > MAX_LISTED else ""
    return (
        f"<details><summary>{len(items):,}</summary>"
        f'<ul style="margin:0;padding-left:18px">{shown}{more}</ul></details>'
    )


def table_html(table: ShownTable, state: TableState) -> str:
    partition_keys = set(table.partition_by)
    bucket_keys = set(table.bucket_key)

    def role(name: str) -> str:
        if name in partition_keys:
            return "partition key"
        return "bucket key" if name in bucket_keys else ""

    snapshot, problem = _latest(table)
    view = _view(state, snapshot, problem)
    fields = list(view.arrow_schema)
    schema = _grid(
        ["column", "type", "nullable", ""],
        (
            (f.name, _cut(str(f.type)), "yes" if f.nullable else "no", role(f.name))
            for f in fields[:MAX_COLUMNS]
        ),
    )
    if len(fields) > MAX_COLUMNS:
        schema += f"<div>… {len(fields) - MAX_COLUMNS:,} more columns</div>"
    options = view.options.as_dict()
    if problem is not None:
        latest = _e(problem)
        files = "-"
    elif snapshot is None:
        latest, files = "none (empty table)", "0"
    else:
        latest = _e(_snapshot_text(snapshot))
        files = f"{snapshot.total_file_count:,}"
    rows = [
        ("schema", schema),
        ("partitioned by", _e(", ".join(table.partition_by) or "-")),
        ("layout", _e(_layout_text(table))),
        (
            "options",
            _grid(["key", "value"], sorted(options.items())) if options else "defaults",
        ),
        ("latest snapshot", latest),
        ("data files", files),
    ]
    return _card("Table", table.uri, rows)


def scan_html(
    snapshot: Snapshot | None,
    columns: Sequence[str] | None,
    row_filter: Filter | None,
    splits: Sequence[Split] | None,
) -> str:
    rows = [
        ("snapshot", _e(_snapshot_text(snapshot)) if snapshot else "none (empty table)"),
        ("columns", _e(_cut(", ".join(columns))) if columns is not None else "all"),
        ("filter", f"<code>{_e(filter_text(row_filter))}</code>"),
    ]
    if splits is None:
        rows.append(("plan", "not planned yet (call <code>plan()</code>)"))
    else:
        rows.append(("plan", _e(_splits_text(splits))))
        if splits:
            rows.append(("splits", _split_grid(splits)))
    return _card("Scan", f"snapshot {snapshot.id}" if snapshot else "empty table", rows)


def _split_grid(splits: Sequence[Split]) -> str:
    shown = splits[:MAX_LISTED]
    grid = _grid(
        ["partition", "bucket", "files", "rows", "size"],
        (
            (
                ", ".join(f"{k}={v}" for k, v in s.partition.items()) or "-",
                s.bucket,
                len(s.files),
                f"{s.row_count:,}",
                format_bytes(s.file_size),
            )
            for s in shown
        ),
    )
    if len(splits) > len(shown):
        grid += f"<div>… {len(splits) - len(shown):,} more splits</div>"
    return grid


def unit_html(unit: ShownUnit) -> str:
    rows = [
        ("kind", _e(f"{unit.commit_kind.value} ({'full read' if unit.full else 'delta'})")),
        ("rows", f"{unit.row_count:,}"),
        ("files", f"{unit.file_count:,}"),
        ("watermark", _e(format_ms(unit.watermark))),
        ("next", _e(unit.next_position.to_json())),
    ]
    if unit.splits:
        rows.append(("splits", _split_grid(unit.splits)))
    return _card("StreamUnit", f"snapshot {unit.snapshot_id}", rows)


def expire_html(result: ShownExpiration) -> str:
    rows = [
        ("snapshots", _e(_range(result.expired_snapshots))),
        ("data files", _listing(result.deleted_data_files)),
        ("metadata files", _listing(result.deleted_metadata_files)),
        ("consumers", _listing(result.expired_consumers)),
        ("consumer groups", _listing(result.expired_groups)),
        ("earliest retained", _e(result.earliest_snapshot)),
    ]
    return _card("ExpireResult", "dry run" if result.dry_run else "done", rows)


def orphan_html(result: ShownOrphans) -> str:
    rows = [("files", _listing(result.files)), ("size", _e(format_bytes(result.bytes)))]
    if result.not_table_files:
        rows.append(("not the table's", _listing(result.not_table_files)))
    return _card("OrphanResult", "dry run" if result.dry_run else "deleted", rows)


def plan_html(plan: ShownPlan) -> str:
    shown = plan.tasks[:MAX_LISTED]
    grid = _grid(
        ["partition", "bucket", "files", "size", "kind"],
        (
            (
                task.partition,
                task.bucket,
                len(task.files),
                format_bytes(task.file_size),
                f"sort by {', '.join(task.sort_by)} ({task.strategy})"
                if task.sort_by
                else ("ordered merge" if task.ordered else "merge"),
            )
            for task in shown
        ),
    )
    if len(plan.tasks) > len(shown):
        grid += f"<div>… {len(plan.tasks) - len(shown):,} more tasks</div>"
    rows = [("summary", _e(plan_repr(plan))), ("tasks", grid if plan.tasks else "none")]
    return _card("CompactionPlan", f"snapshot {plan.snapshot_id}", rows)
