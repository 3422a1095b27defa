"""fsspec's ``memory://`` file system: one process's store, for tests and notebooks.

Atomic create within the process: a process-wide lock around check-and-create (the store
itself is process-wide). Other processes never see it, so ``atomic_create`` holds.
"""

from __future__ import annotations

import threading

from appendtable.storage.fsspec_store import FsspecStorage

__all__ = ["MemoryStorage"]

_LOCK = threading.Lock()


class MemoryStorage(FsspecStorage):
    """Files under a root of fsspec's in-memory file system."""

    atomic_create = True
    backend = "memory"

    def _put_if_absent(self, path: str, data: bytes) -> bool:
        full = self._full(path)
        with _LOCK:
            if self.fs.exists(full):
                return False
            self._make_parent(full)
            self.fs.pipe_file(full, data)
            return True
