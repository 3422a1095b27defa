"""What runs after each commit of a table handle (unless ``write-only``): compaction of what
was just written, then snapshot expiration, then the Iceberg mirror; inline in the commit or on
the handle's background worker, as ``commit.maintenance`` says (see
``appendtable.after_commit.worker``). Every round runs under ``guard.run_maintenance``.

The background worker works on a table state of its own (the same storage): the committing
thread's state is never touched from the worker, and the worker's compaction commits race the
caller's appends through the same optimistic protocol as any two writers.
"""

from __future__ import annotations

from collections.abc import Sequence

from appendtable._state import TableState
from appendtable.after_commit.guard import publish_mirror_quietly, run_maintenance
from appendtable.after_commit.worker import BackgroundMaintenance, MaintenanceRound, Written
from appendtable.compaction import AutoCompaction
from appendtable.maintenance import expire_snapshots
from appendtable.metadata import options as opt
from appendtable.metadata.models import CommitMessage, FileKind, Snapshot

__all__ = ["PostCommit"]


class _Maintainer:
    """Rounds of maintenance on one table state, keeping the compaction coordinator (which
    remembers small files across commits) from round to round."""

    def __init__(self, state: TableState) -> None:
        self.state = state
        self._compaction: AutoCompaction | None = None

    def run(self, work: MaintenanceRound, *, read_latest: bool) -> None:
        state = self.state
        # Inline, the snapshot just committed is the latest (no read); the worker reads it.
        view = state.refresh() if read_latest else state.refresh(work.snapshot)
        if view.options.get(opt.WRITE_ONLY):
            return
        if work.written:
            if self._compaction is None or self._compaction.options != view.options:
                self._compaction = AutoCompaction(state)
            compacted = self._compaction.after_commit(work.written, commits=work.commits)
            # Inline, the commit's own mirror publish (after this round) covers the COMPACT
            # snapshot; the worker publishes it itself.
            if compacted is not None and read_latest:
                publish_mirror_quietly(state, compacted)
        expire_snapshots(state, release_tags=False)


class PostCommit:
    """The post-commit hook of one table handle (``TableCommit``'s ``after_commit``)."""

    def __init__(self, state: TableState) -> None:
        self._state = state
        self._inline = _Maintainer(state)
        self._worker_side: _Maintainer | None = None
        self._worker: BackgroundMaintenance | None = None

    def __call__(self, snapshot: Snapshot, messages: Sequence[CommitMessage]) -> None:
        """After ``snapshot`` landed with ``messages``. Runs inside ``run_maintenance`` (what
        it raises is logged, never raised to the committer)."""
        self.after(snapshot, frozenset((m.partition, m.bucket) for m in messages if m.new_files))

    def after_delete(self, snapshot: Snapshot) -> None:
        """After a DELETE snapshot landed: the (partition, bucket) pairs of the files it
        re-added (with a deletion vector) or rewrote count as written, so a file with at
        least half its rows deleted is rewritten as after an append. Runs inside
        ``run_maintenance``."""
        written: Written = frozenset()
        try:
            entries = self._state.manifests.delta_entries(snapshot)
            written = frozenset((e.partition, e.bucket) for e in entries if e.kind == FileKind.ADD)
        finally:  # (the mirror is published whatever happens)
            self.after(snapshot, written)

    def after(self, snapshot: Snapshot, written: Written) -> None:
        """After ``snapshot`` landed, having written files in ``written``."""
        view = self._state.refresh(snapshot)  # the snapshot just committed: no read
        try:
            if view.options.get(opt.WRITE_ONLY):
                return
            work = MaintenanceRound(snapshot, written)
            if view.options.get(opt.COMMIT_MAINTENANCE) == "inline":
                self._inline.run(work, read_latest=False)
            else:
                self._background().submit(work)
        finally:
            publish_mirror_quietly(self._state, snapshot)

    def _background(self) -> BackgroundMaintenance:
        if self._worker is None:
            self._worker = BackgroundMaintenance(self._run_round, name=self._state.storage.root)
        return self._worker

    def _run_round(self, work: MaintenanceRound) -> None:
        if self._worker_side is None:
            # a state of its own, taking turns at committing with the handle's (``turns``)
            state = TableState(self._state.storage, self._state.schema, turns=self._state.turns)
            self._worker_side = _Maintainer(state)
        maintainer = self._worker_side
        run_maintenance(lambda: maintainer.run(work, read_latest=True), work.snapshot)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the maintenance this handle's commits asked for (True once done)."""
        return self._worker.wait(timeout) if self._worker is not None else True
