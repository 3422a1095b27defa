"""What happens after a snapshot landed, and the guarantee that it never makes that snapshot
look failed.

* ``hook``: ``PostCommit``, the after-commit hook of a table handle (``TableCommit``'s
  ``after_commit``): compaction of what was just written, snapshot expiration, the Iceberg
  mirror; inline or on the worker, as ``commit.maintenance`` says.
* ``worker``: ``BackgroundMaintenance``, one worker thread per handle that runs those rounds
  off the committer's latency path, coalescing requests and finishing before the process exits.
* ``guard``: the only two handlers of the library that catch every exception
  (``run_maintenance``, ``publish_mirror_quietly``): what fails after a snapshot landed is
  logged with its id, never raised.
"""
