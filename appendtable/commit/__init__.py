"""Layer 5, the commit layer: everything written under a table's metadata directories, and the
protocol that makes a new snapshot visible atomically (imports the layers below it except the
data files: it moves file *names*, never rows).

It owns: the commit protocol turning a request into the next snapshot (``changes``: the
request and the pure rules applied to it; ``committer``: conflict checks, put-if-absent
publication, idempotence records); the snapshot log, schema versions, manifests and tags
(``snapshots``, ``schemas``, ``manifests``, ``tags``) and the checks of what they name
(``validation``); the live file set kept current snapshot by snapshot (``live_index``) and the
process-wide cache of immutable metadata (``metadata_cache``); the one gate every delete of
unlanded data files takes (``discard``) and executing an expiration (``expire``); stream
consumers and consumer groups (``consumers``, ``groups``); and writing the Iceberg mirror
(``iceberg_mirror``).
"""
