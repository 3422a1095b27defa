"""Layer 2, pure planning: every decision about a table that can be made on metadata alone,
with no I/O (imports only ``errors``, ``metadata`` and, for the vectorised bucket hash and sort
orders, numpy and pyarrow).

It owns: bucket assignment bit-for-bit equal to Spark's (``bucket``); row filters, their
operators, and pruning with statistics and bloom filters (``filters``, ``operators``,
``file_index``, ``parquet_bloom``); partition directory names (``partitions``); ordering and
packing files into read splits (``splits``); which files to compact and in what row order
(``compaction_selection``, ``sort_keys``); which manifests to merge (``manifest_merge``);
which snapshots may expire (``expiration``); schema changes as data (``schema_changes``);
where a stream starts and what each snapshot emits (``stream_rules``); which group member
reads which unit (``groups``); and the Iceberg v2 view of a table (``iceberg_metadata``).
The layers above carry these plans out: ``commit`` publishes them, the facade reads and
writes the files.
"""
