"""The metadata codec and the persisted structs: round trips, determinism, integrity, evolution.

Every persisted struct must survive ``encode``/``decode`` (and pickle) unchanged and with the
same value types; equal objects must give equal bytes; and damaged, foreign or newer files must
raise ``CorruptMetadataError`` (naming the file) or ``UnsupportedFormatVersionError``, never
return a wrong value or leak a foreign exception.
"""

from __future__ import annotations

import gc
import inspect
import pickle
import struct
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from appendtable.errors import CorruptMetadataError, UnsupportedFormatVersionError
from appendtable.metadata import codec, models, types
from appendtable.metadata.codec import FORMAT_VERSION, HEADER_SIZE, MAGIC, Kind
from appendtable.metadata.models import (
    CommitKind,
    CommitMessage,
    CommitUserRecord,
    CommitUsers,
    ConsumerState,
    DataFileMeta,
    DeleteRecord,
    DeletionVectorRef,
    FileKind,
    FileSource,
    Manifest,
    ManifestEntry,
    ManifestFileMeta,
    ManifestList,
    Snapshot,
    Split,
    StoredPredicate,
    TableSchema,
    WatermarkMember,
)
from appendtable.metadata.types import FieldSpec, TypeSpec

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PATH = "s3://bucket/table/snapshot/snapshot-7"

# ---- strategies ---------------------------------------------------------------------------------

int64s = st.integers(min_value=-(2**63), max_value=2**63 - 1)
small_ints = st.integers(min_value=-(2**31), max_value=2**31 - 1)
naturals = st.integers(min_value=0, max_value=2**62)
names = st.text(max_size=12)
stat_values = st.one_of(
    st.none(),
    st.booleans(),
    int64s,
    st.floats(allow_nan=False),
    st.text(max_size=20),
    st.binary(max_size=20),
)
partitions = st.lists(stat_values, max_size=3).map(tuple)


deletion_refs = st.builds(
    DeletionVectorRef,
    path=st.text(min_size=1, max_size=40),
    offset=naturals,
    length=naturals,
    cardinality=naturals,
)


@st.composite
def data_files(draw: st.DrawFn) -> DataFileMeta:
    columns = draw(st.integers(min_value=0, max_value=4))
    min_seq = draw(naturals)
    return DataFileMeta(
        path=draw(st.text(min_size=1, max_size=40)),
        file_size=draw(naturals),
        row_count=draw(naturals),
        min_seq=min_seq,
        max_seq=draw(st.integers(min_value=min_seq - 1, max_value=2**63 - 1)),
        schema_id=draw(st.integers(min_value=0, max_value=1000)),
        creation_time_ms=draw(int64s),
        source=draw(st.sampled_from(list(FileSource))).value,
        null_counts=tuple(draw(st.lists(st.none() | naturals, min_size=columns, max_size=columns))),
        min_values=tuple(draw(st.lists(stat_values, min_size=columns, max_size=columns))),
        max_values=tuple(draw(st.lists(stat_values, min_size=columns, max_size=columns))),
        deletion=draw(st.none() | deletion_refs),
    )


manifest_entries = st.builds(
    ManifestEntry,
    kind=st.sampled_from([FileKind.ADD.value, FileKind.DELETE.value]),
    partition=partitions,
    bucket=st.integers(min_value=0, max_value=1024),
    total_buckets=st.integers(min_value=-1, max_value=1024),
    file=data_files(),
)
manifests = st.builds(Manifest, entries=st.lists(manifest_entries, max_size=5))
manifest_file_metas = st.builds(
    ManifestFileMeta,
    file_name=names,
    file_size=naturals,
    num_added=naturals,
    num_deleted=naturals,
    schema_id=naturals,
    min_bucket=small_ints,
    max_bucket=small_ints,
    partition_min=partitions,
    partition_max=partitions,
    partition_null_counts=st.lists(naturals, max_size=3).map(tuple),
    min_seq=naturals,
    max_seq=int64s,
)
manifest_lists = st.builds(ManifestList, manifests=st.lists(manifest_file_metas, max_size=5))
commit_users = st.builds(
    CommitUsers,
    records=st.lists(st.builds(CommitUserRecord, names, int64s, naturals, int64s), max_size=5),
)
consumer_states = st.builds(ConsumerState, next_snapshot=naturals, time_ms=int64s)
watermark_members = st.builds(WatermarkMember, watermark=st.none() | int64s, time_ms=int64s)
str_maps = st.dictionaries(names, names, max_size=4)
snapshots = st.builds(
    Snapshot,
    id=naturals,
    schema_id=naturals,
    parent_id=st.none() | naturals,
    kind=st.sampled_from(list(CommitKind)),
    commit_user=names,
    commit_identifier=int64s,
    time_ms=int64s,
    base_manifest_list=names,
    delta_manifest_list=names,
    total_record_count=naturals,
    delta_record_count=int64s,
    total_file_count=naturals,
    next_sequence=naturals,
    watermark=st.none() | int64s,
    nonce=names,
    commit_users=st.none() | names,
    properties=str_maps,
    delete_record=st.none() | names,
)

_LEAF_KINDS_FOR_RECORDS = ["int64", "string", "float64"]
delete_records = st.builds(
    DeleteRecord,
    base_snapshot=naturals,
    schema_id=naturals,
    clauses=st.lists(
        st.lists(
            st.builds(
                StoredPredicate,
                column=names,
                path=st.lists(names, max_size=2).map(tuple),
                op=st.sampled_from(["=", "in", "is null", "<"]),
                values=st.lists(stat_values, max_size=3).map(tuple),
                type=st.builds(TypeSpec, kind=st.sampled_from(_LEAF_KINDS_FOR_RECORDS)),
                field_id=st.none() | st.integers(1, 1000),
            ),
            min_size=1,
            max_size=3,
        ).map(tuple),
        max_size=3,
    ).map(tuple),
)

_LEAF_KINDS = ["bool", "int8", "int64", "uint64", "float64", "string", "binary", "date32"]
leaf_types = st.one_of(
    st.builds(TypeSpec, kind=st.sampled_from(_LEAF_KINDS)),
    st.builds(
        TypeSpec,
        kind=st.just("timestamp"),
        unit=st.sampled_from(["s", "ms", "us", "ns"]),
        tz=st.none() | st.sampled_from(["UTC", "Europe/Paris", "+02:00"]),
    ),
    st.builds(
        TypeSpec,
        kind=st.just("decimal"),
        precision=st.integers(1, 76),
        scale=st.integers(-10, 76),
    ),
    st.builds(TypeSpec, kind=st.just("fixed_size_binary"), byte_width=st.integers(1, 64)),
)


def _nested(children: st.SearchStrategy[TypeSpec]) -> st.SearchStrategy[TypeSpec]:
    child_fields = st.lists(
        st.builds(FieldSpec, name=names, type=children, nullable=st.booleans()),
        min_size=1,
        max_size=3,
    ).map(tuple)
    return st.builds(
        TypeSpec, kind=st.sampled_from(["struct", "list", "map", "large_list"]), fields=child_fields
    )


type_specs = st.recursive(leaf_types, _nested, max_leaves=8)
field_specs = st.builds(FieldSpec, name=names, type=type_specs, nullable=st.booleans())
table_schemas = st.builds(
    TableSchema,
    id=naturals,
    fields=st.lists(field_specs, min_size=1, max_size=4).map(tuple),
    partition_keys=st.lists(names, max_size=2).map(tuple),
    options=str_maps,
    time_ms=int64s,
)
commit_messages = st.builds(
    CommitMessage,
    partition=partitions,
    bucket=st.integers(-1, 1024),
    total_buckets=st.integers(-1, 1024),
    schema_id=naturals,
    new_files=st.lists(data_files(), max_size=3).map(tuple),
    compact_before=st.lists(data_files(), max_size=3).map(tuple),
    compact_after=st.lists(data_files(), max_size=3).map(tuple),
    max_event_time_ms=st.none() | int64s,
)
splits = st.builds(
    Split,
    snapshot_id=naturals,
    partition_keys=st.lists(names, max_size=3).map(tuple),
    partition_types=st.lists(leaf_types, max_size=3).map(tuple),
    partition_values=partitions,
    bucket=st.integers(-1, 1024),
    files=st.lists(data_files(), max_size=4).map(tuple),
)

#: Every persisted struct: (kind, its type, a strategy for it).
PERSISTED: list[tuple[Kind, type[Any], st.SearchStrategy[Any]]] = [
    (Kind.SCHEMA, TableSchema, table_schemas),
    (Kind.SNAPSHOT, Snapshot, snapshots),
    (Kind.MANIFEST, Manifest, manifests),
    (Kind.MANIFEST_LIST, ManifestList, manifest_lists),
    (Kind.COMMIT_USERS, CommitUsers, commit_users),
    (Kind.CONSUMER, ConsumerState, consumer_states),
    (Kind.WATERMARK_GROUP, WatermarkMember, watermark_members),
    (Kind.COMMIT_MESSAGE, CommitMessage, commit_messages),
    (Kind.SPLIT, Split, splits),
    (Kind.DELETE_RECORD, DeleteRecord, delete_records),
]
PERSISTED_IDS = [kind.name.lower() for kind, _, _ in PERSISTED]


def typed(value: object) -> object:
    """``value`` with the type of every scalar made explicit, so that ``True`` and ``1``, or
    ``1`` and ``1.0``, or ``b"a"`` and ``"a"`` compare unequal."""
    if isinstance(value, msgspec.Struct):
        return (
            type(value).__name__,
            tuple((f, typed(getattr(value, f))) for f in value.__struct_fields__),
        )
    if isinstance(value, list | tuple):
        return (type(value).__name__, tuple(typed(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((k, typed(v)) for k, v in value.items())))
    return (type(value).__name__, value)


def sample_snapshot(**changes: Any) -> Snapshot:
    fields: dict[str, Any] = {
        "id": 7,
        "schema_id": 0,
        "parent_id": 6,
        "kind": CommitKind.APPEND,
        "commit_user": "writer-1",
        "commit_identifier": 42,
        "time_ms": 1_700_000_000_000,
        "base_manifest_list": "manifest-list-a",
        "delta_manifest_list": "manifest-list-b",
        "total_record_count": 100,
        "delta_record_count": 10,
        "total_file_count": 3,
        "next_sequence": 100,
        "watermark": 1_699_999_000_000,
        "properties": {"k": "v"},
    }
    fields.update(changes)
    return Snapshot(**fields)


def sample_file(path: str = "p=1/bucket-0/data-1.parquet", min_seq: int = 0) -> DataFileMeta:
    return DataFileMeta(
        path=path,
        file_size=1234,
        row_count=10,
        min_seq=min_seq,
        max_seq=min_seq + 9,
        schema_id=0,
        creation_time_ms=1_700_000_000_000,
        source=FileSource.APPEND,
        null_counts=(0, 3, None),
        min_values=(1, "a", None),
        max_values=(9, "z", None),
    )


def frame(payload: bytes, kind: Kind, *, encoding: int, version: int = 1) -> bytes:
    header = struct.pack(
        "<4sBBBBQI", MAGIC, version, encoding, int(kind), 0, len(payload), codec.crc32c(payload)
    )
    return header + payload


# ---- round trips --------------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "type_", "strategy"), PERSISTED, ids=PERSISTED_IDS)
def test_round_trip_of_every_persisted_struct(
    kind: Kind, type_: type[Any], strategy: st.SearchStrategy[Any]
) -> None:
    @FAST
    @given(strategy)
    def check(obj: Any) -> None:
        data = codec.encode(obj, kind)
        decoded = codec.decode(data, type_, kind, PATH)
        assert decoded == obj
        assert typed(decoded) == typed(obj)
        assert codec.encode(decoded, kind) == data  # equal objects, equal bytes
        unpickled = pickle.loads(pickle.dumps(obj))
        assert typed(unpickled) == typed(obj)

    check()


@FAST
@given(commit_messages)
def test_commit_message_to_bytes_round_trip(message: CommitMessage) -> None:
    data = message.to_bytes()
    assert data[:4] == MAGIC
    decoded = CommitMessage.from_bytes(data)
    assert typed(decoded) == typed(message)
    assert typed(pickle.loads(pickle.dumps(message))) == typed(message)
    assert decoded.is_empty == (
        not (message.new_files or message.compact_before or message.compact_after)
    )


@FAST
@given(splits)
def test_split_to_bytes_round_trip(split: Split) -> None:
    decoded = Split.from_bytes(split.to_bytes())
    assert typed(decoded) == typed(split)
    assert typed(pickle.loads(pickle.dumps(split))) == typed(split)
    assert decoded.row_count == sum(
        f.row_count - (f.deletion.cardinality if f.deletion else 0) for f in split.files
    )
    assert decoded.file_size == sum(f.file_size for f in split.files)


def test_commit_message_is_empty() -> None:
    empty = CommitMessage(partition=(), bucket=0, total_buckets=-1, schema_id=0)
    assert empty.is_empty
    assert not msgspec.structs.replace(empty, new_files=(sample_file(),)).is_empty
    assert not msgspec.structs.replace(empty, compact_before=(sample_file(),)).is_empty
    assert not msgspec.structs.replace(empty, compact_after=(sample_file(),)).is_empty


def test_damaged_commit_message_and_split_bytes_raise_corrupt() -> None:
    message = CommitMessage(
        partition=(1,), bucket=0, total_buckets=2, schema_id=0, new_files=(sample_file(),)
    )
    data = bytearray(message.to_bytes())
    data[-1] ^= 0x01
    with pytest.raises(CorruptMetadataError, match="commit message"):
        CommitMessage.from_bytes(bytes(data))
    split = Split(
        snapshot_id=1,
        partition_keys=(),
        partition_types=(),
        partition_values=(),
        bucket=0,
        files=(sample_file(),),
    )
    with pytest.raises(CorruptMetadataError, match="split"):
        Split.from_bytes(split.to_bytes()[:-1])
    with pytest.raises(CorruptMetadataError):  # a commit message is not a split
        Split.from_bytes(message.to_bytes())


def test_large_manifest_round_trip_and_gc_state_restored() -> None:
    entries = [
        ManifestEntry(FileKind.ADD, (i % 7, f"p{i}"), i % 4, 4, sample_file(f"f-{i}", i * 10))
        for i in range(2000)
    ]
    manifest = Manifest(entries)
    data = codec.encode(manifest, Kind.MANIFEST)
    assert len(data) > 64 * 1024  # takes the GC-paused path
    assert gc.isenabled()
    assert codec.decode(data, Manifest, Kind.MANIFEST, PATH) == manifest
    assert gc.isenabled()
    # A failing large decode must restore the collector too.
    bad = msgspec.msgpack.encode([[["not an entry"] * 20_000]])
    with pytest.raises(CorruptMetadataError):
        codec.decode(frame(bad, Kind.MANIFEST, encoding=2), Manifest, Kind.MANIFEST, PATH)
    assert gc.isenabled()
    gc.disable()
    try:
        codec.decode(data, Manifest, Kind.MANIFEST, PATH)
        assert not gc.isenabled()  # a disabled collector stays disabled
    finally:
        gc.enable()


# ---- determinism --------------------------------------------------------------------------------


def test_equal_objects_give_equal_bytes_whatever_the_dict_order() -> None:
    forward = {f"key-{i}": str(i) for i in range(20)}
    backward = dict(reversed(list(forward.items())))
    assert list(forward) != list(backward)
    a = sample_snapshot(properties=forward)
    b = sample_snapshot(properties=backward)
    assert a == b
    assert codec.encode(a, Kind.SNAPSHOT) == codec.encode(b, Kind.SNAPSHOT)
    schema_a = TableSchema(
        id=1, fields=(FieldSpec(name="a", type=TypeSpec(kind="int64")),), options=forward
    )
    schema_b = TableSchema(
        id=1, fields=(FieldSpec(name="a", type=TypeSpec(kind="int64")),), options=backward
    )
    assert codec.encode(schema_a, Kind.SCHEMA) == codec.encode(schema_b, Kind.SCHEMA)


@pytest.mark.parametrize(("kind", "type_", "strategy"), PERSISTED, ids=PERSISTED_IDS)
def test_encoding_is_deterministic(
    kind: Kind, type_: type[Any], strategy: st.SearchStrategy[Any]
) -> None:
    @settings(max_examples=15, deadline=None)
    @given(strategy)
    def check(obj: Any) -> None:
        rebuilt = msgspec.structs.replace(obj)  # an equal, distinct object
        assert rebuilt is not obj
        assert codec.encode(rebuilt, kind) == codec.encode(obj, kind)
        copied = pickle.loads(pickle.dumps(obj))
        assert codec.encode(copied, kind) == codec.encode(obj, kind)

    check()


def test_frame_layout() -> None:
    snapshot = sample_snapshot()
    data = codec.encode(snapshot, Kind.SNAPSHOT)
    magic, version, encoding, kind, reserved, length, crc = struct.unpack_from("<4sBBBBQI", data)
    assert (magic, version, encoding, kind, reserved) == (MAGIC, 1, 1, Kind.SNAPSHOT, 0)
    assert length == len(data) - HEADER_SIZE
    assert crc == codec.crc32c(data[HEADER_SIZE:])
    assert msgspec.json.decode(data[HEADER_SIZE:])["id"] == 7  # snapshots are JSON
    assert codec.crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    manifest_data = codec.encode(Manifest([]), Kind.MANIFEST)
    assert manifest_data[5] == 2  # manifests are MessagePack


# ---- integrity ----------------------------------------------------------------------------------


def small_snapshot_file() -> bytes:
    data = codec.encode(sample_snapshot(), Kind.SNAPSHOT)
    assert len(data) < 1024
    return data


def test_every_flipped_byte_is_detected() -> None:
    data = small_snapshot_file()
    checked = 0
    for index in range(len(data)):
        for mask in (0x01, 0x02, 0x10, 0x80, 0xFF):
            damaged = bytearray(data)
            damaged[index] ^= mask
            if index == 4 and damaged[index] > codec.FRAME_VERSION:
                # A larger frame version is what a newer writer produces: it must say so.
                with pytest.raises(UnsupportedFormatVersionError, match=PATH):
                    codec.decode(bytes(damaged), Snapshot, Kind.SNAPSHOT, PATH)
                continue
            with pytest.raises(CorruptMetadataError) as info:
                codec.decode(bytes(damaged), Snapshot, Kind.SNAPSHOT, PATH)
            assert info.value.path == PATH
            assert PATH in str(info.value)
            checked += 1
    assert checked > 4 * len(data)


def test_every_truncation_is_detected() -> None:
    data = small_snapshot_file()
    for length in range(len(data)):
        with pytest.raises(CorruptMetadataError) as info:
            codec.decode(data[:length], Snapshot, Kind.SNAPSHOT, PATH)
        assert info.value.path == PATH
        assert PATH in str(info.value)


def test_padding_is_detected() -> None:
    data = small_snapshot_file()
    for extra in (b"\x00", b" ", b"\n", b"x" * 100):
        with pytest.raises(CorruptMetadataError, match=PATH):
            codec.decode(data + extra, Snapshot, Kind.SNAPSHOT, PATH)


@pytest.mark.parametrize("expected", [k for k in Kind if k != Kind.SNAPSHOT], ids=str)
def test_wrong_kind_is_corrupt(expected: Kind) -> None:
    data = small_snapshot_file()
    with pytest.raises(CorruptMetadataError, match="snapshot") as info:
        codec.decode(data, Snapshot, expected, PATH)
    assert info.value.path == PATH
    assert PATH in str(info.value)


def test_unknown_kind_byte_is_corrupt() -> None:
    data = bytearray(small_snapshot_file())
    data[6] = 200
    with pytest.raises(CorruptMetadataError, match="unknown"):
        codec.decode(bytes(data), Snapshot, Kind.SNAPSHOT, PATH)


def test_not_a_metadata_file_is_corrupt() -> None:
    for data in (b"PAR1" + b"\x00" * 40, b"{}" * 20, b"\x00" * HEADER_SIZE):
        with pytest.raises(CorruptMetadataError, match=PATH):
            codec.decode(data, Snapshot, Kind.SNAPSHOT, PATH)


def test_unknown_encoding_is_corrupt() -> None:
    payload = msgspec.json.encode(sample_snapshot())
    for encoding in (0, 3, 255):
        with pytest.raises(CorruptMetadataError, match="encoding"):
            codec.decode(
                frame(payload, Kind.SNAPSHOT, encoding=encoding), Snapshot, Kind.SNAPSHOT, PATH
            )


def test_msgpack_payload_where_json_expected_still_decodes_by_its_frame() -> None:
    # The frame says how the payload is encoded; the reader follows it.
    payload = msgspec.msgpack.encode(sample_snapshot())
    decoded = codec.decode(frame(payload, Kind.SNAPSHOT, encoding=2), Snapshot, Kind.SNAPSHOT, PATH)
    assert decoded == sample_snapshot()


@pytest.mark.parametrize("version", [2, 3, 255])
def test_newer_frame_version_is_unsupported(version: int) -> None:
    payload = msgspec.json.encode(sample_snapshot())
    data = frame(payload, Kind.SNAPSHOT, encoding=1, version=version)
    with pytest.raises(UnsupportedFormatVersionError, match=PATH) as info:
        codec.decode(data, Snapshot, Kind.SNAPSHOT, PATH)
    assert str(version) in str(info.value)


def test_frame_version_zero_and_nonzero_reserved_byte_are_corrupt() -> None:
    payload = msgspec.json.encode(sample_snapshot())
    with pytest.raises(CorruptMetadataError, match=PATH):
        codec.decode(
            frame(payload, Kind.SNAPSHOT, encoding=1, version=0), Snapshot, Kind.SNAPSHOT, PATH
        )
    data = bytearray(frame(payload, Kind.SNAPSHOT, encoding=1))
    data[7] = 1
    with pytest.raises(CorruptMetadataError, match=PATH):
        codec.decode(bytes(data), Snapshot, Kind.SNAPSHOT, PATH)


@pytest.mark.parametrize(
    ("kind", "obj"),
    [
        (Kind.SNAPSHOT, sample_snapshot(format_version=FORMAT_VERSION + 1)),
        (
            Kind.SCHEMA,
            TableSchema(
                format_version=FORMAT_VERSION + 5,
                id=0,
                fields=(FieldSpec(name="a", type=TypeSpec(kind="int8")),),
            ),
        ),
    ],
    ids=["snapshot", "schema"],
)
def test_newer_payload_format_version_is_unsupported(kind: Kind, obj: msgspec.Struct) -> None:
    data = codec.encode(obj, kind)
    with pytest.raises(UnsupportedFormatVersionError, match=PATH) as info:
        codec.decode(data, type(obj), kind, PATH)
    assert str(obj.format_version) in str(info.value)  # type: ignore[attr-defined]


def test_newer_format_version_is_refused_before_values_it_may_add() -> None:
    """A newer version may write values this reader cannot decode (a snapshot kind it does
    not know): the version is checked first, so the error says "upgrade", not "corrupt"."""
    payload = msgspec.json.encode(
        {
            **msgspec.to_builtins(sample_snapshot()),
            "format_version": FORMAT_VERSION + 1,
            "kind": "SOMETHING-NEW",
        }
    )
    with pytest.raises(UnsupportedFormatVersionError, match="upgrade"):
        codec.decode(frame(payload, Kind.SNAPSHOT, encoding=1), Snapshot, Kind.SNAPSHOT, PATH)
    same_version = msgspec.json.encode(
        {**msgspec.to_builtins(sample_snapshot()), "kind": "SOMETHING-NEW"}
    )
    with pytest.raises(CorruptMetadataError):
        codec.decode(frame(same_version, Kind.SNAPSHOT, encoding=1), Snapshot, Kind.SNAPSHOT, PATH)


def test_current_and_older_payload_format_versions_decode() -> None:
    for version in (0, FORMAT_VERSION):
        snapshot = sample_snapshot(format_version=version)
        decoded = codec.decode(codec.encode(snapshot, Kind.SNAPSHOT), Snapshot, Kind.SNAPSHOT, PATH)
        assert decoded == snapshot


# ---- decoding garbage ---------------------------------------------------------------------------

DECODE_TARGETS: list[tuple[Kind, type[Any]]] = [(kind, type_) for kind, type_, _ in PERSISTED]


def _decode_only_known_errors(data: bytes, type_: type[Any], kind: Kind) -> None:
    try:
        codec.decode(data, type_, kind, PATH)
    except CorruptMetadataError as exc:
        assert exc.path == PATH
        assert PATH in str(exc)
    except UnsupportedFormatVersionError as exc:
        assert PATH in str(exc)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200), st.sampled_from(DECODE_TARGETS))
def test_random_bytes_raise_only_codec_errors(data: bytes, target: tuple[Kind, type[Any]]) -> None:
    kind, type_ = target
    _decode_only_known_errors(data, type_, kind)
    # The same bytes behind a plausible header (right magic and kind, any other header field).
    header = MAGIC + bytes([data[0] if data else 1, data[1] if len(data) > 1 else 1, int(kind)])
    _decode_only_known_errors(header + data[2:], type_, kind)


json_values = st.recursive(
    st.none() | st.booleans() | int64s | st.floats() | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=12,
)


def _struct_like(type_: type[Any]) -> st.SearchStrategy[Any]:
    """Payloads that look like ``type_`` (its field names or positions) with random values."""
    fields = [f.name for f in msgspec.structs.fields(type_)]
    if type_.__struct_config__.array_like:
        return st.lists(json_values, min_size=max(0, len(fields) - 2), max_size=len(fields) + 1)
    return st.fixed_dictionaries({}, optional=dict.fromkeys(fields, json_values))


@settings(max_examples=100, deadline=None)
@given(st.data(), st.sampled_from(DECODE_TARGETS), st.sampled_from([1, 2]))
def test_random_payloads_in_a_valid_frame_raise_only_codec_errors(
    data: st.DataObject, target: tuple[Kind, type[Any]], encoding: int
) -> None:
    kind, type_ = target
    value = data.draw(json_values | _struct_like(type_))
    payload = msgspec.json.encode(value) if encoding == 1 else msgspec.msgpack.encode(value)
    if data.draw(st.booleans()):
        payload = data.draw(st.binary(max_size=100))
    _decode_only_known_errors(frame(payload, kind, encoding=encoding), type_, kind)


@pytest.mark.parametrize("encoding", [1, 2])
@pytest.mark.parametrize(("kind", "type_"), DECODE_TARGETS, ids=PERSISTED_IDS)
def test_deeply_nested_payload_is_corrupt(kind: Kind, type_: type[Any], encoding: int) -> None:
    depth = 200_000
    if encoding == 1:
        payload = b"[" * depth + b"]" * depth
    else:
        payload = b"\x91" * depth + b"\xc0"
    with pytest.raises(CorruptMetadataError, match=PATH):
        codec.decode(frame(payload, kind, encoding=encoding), type_, kind, PATH)


def test_deeply_nested_unknown_field_and_schema_type_are_corrupt() -> None:
    depth = 200_000
    payload = b'{"x":' + b"[" * depth + b"]" * depth + b',"next_snapshot":1}'
    with pytest.raises(CorruptMetadataError, match=PATH):
        codec.decode(frame(payload, Kind.CONSUMER, encoding=1), ConsumerState, Kind.CONSUMER, PATH)
    nested = b'{"kind":"int8"}'
    for _ in range(5000):
        nested = b'{"kind":"struct","fields":[{"name":"a","type":' + nested + b"}]}"
    payload = b'{"id":1,"fields":[{"name":"a","type":' + nested + b"}]}"
    with pytest.raises(CorruptMetadataError, match=PATH):
        codec.decode(frame(payload, Kind.SCHEMA, encoding=1), TableSchema, Kind.SCHEMA, PATH)


def test_invalid_enum_and_wrong_types_are_corrupt() -> None:
    raw = msgspec.to_builtins(sample_snapshot())
    for change in ({"kind": "MERGE"}, {"id": "seven"}, {"properties": [1]}, {"parent_id": 1.5}):
        payload = msgspec.json.encode({**raw, **change})
        with pytest.raises(CorruptMetadataError, match=PATH):
            codec.decode(frame(payload, Kind.SNAPSHOT, encoding=1), Snapshot, Kind.SNAPSHOT, PATH)
    missing = {k: v for k, v in raw.items() if k != "next_sequence"}
    with pytest.raises(CorruptMetadataError, match="next_sequence"):
        codec.decode(
            frame(msgspec.json.encode(missing), Kind.SNAPSHOT, encoding=1),
            Snapshot,
            Kind.SNAPSHOT,
            PATH,
        )


# ---- evolution ----------------------------------------------------------------------------------


def _field_spec(info: msgspec.structs.FieldInfo, type_: Any) -> tuple[Any, ...]:
    if info.default is not msgspec.NODEFAULT:
        return (info.name, type_, info.default)
    if info.default_factory is not msgspec.NODEFAULT:
        return (info.name, type_, msgspec.field(default_factory=info.default_factory))
    return (info.name, type_)


def _is_kw_only(cls: type[msgspec.Struct]) -> bool:
    parameters = inspect.signature(cls).parameters.values()
    return all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters)


def variant(
    cls: type[msgspec.Struct],
    *,
    keep: int | None = None,
    extra: tuple[str, Any, Any] | None = None,
    retype: dict[str, Any] | None = None,
) -> type[msgspec.Struct]:
    """A copy of ``cls`` with the same settings: its first ``keep`` fields (an older writer) or
    all of them plus a defaulted ``extra`` trailing field (a newer writer)."""
    infos = msgspec.structs.fields(cls)[:keep]
    spec = [_field_spec(i, (retype or {}).get(i.name, i.type)) for i in infos]
    if extra is not None:
        spec.append(extra)
    config = cls.__struct_config__
    return msgspec.defstruct(
        f"{cls.__name__}Variant",
        spec,
        array_like=config.array_like,
        kw_only=_is_kw_only(cls),
        frozen=config.frozen,
        omit_defaults=config.omit_defaults,
    )


def test_stored_structs_never_forbid_unknown_fields() -> None:
    structs = [
        value
        for module in (models, types)
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, msgspec.Struct)
    ]
    assert {TableSchema, TypeSpec, Snapshot, Manifest, CommitMessage, Split} <= set(structs)
    for cls in structs:
        assert not cls.__struct_config__.forbid_unknown_fields, cls
        # Only trailing fields may have defaults, so an older (shorter) array decodes.
        infos = msgspec.structs.fields(cls)
        defaulted = [
            i.default is not msgspec.NODEFAULT or i.default_factory is not msgspec.NODEFAULT
            for i in infos
        ]
        if cls.__struct_config__.array_like:
            assert defaulted == sorted(defaulted), cls


def test_newer_snapshot_with_extra_trailing_field_decodes() -> None:
    newer_cls = variant(Snapshot, extra=("replication_lag_ms", int, 0))
    current = sample_snapshot()
    newer = newer_cls(**msgspec.structs.asdict(current), replication_lag_ms=1234)
    data = codec.encode(newer, Kind.SNAPSHOT)
    assert b"replication_lag_ms" in data
    assert codec.decode(data, Snapshot, Kind.SNAPSHOT, PATH) == current


def test_newer_schema_with_extra_fields_in_nested_types_decodes() -> None:
    newer_type = variant(TypeSpec, extra=("collation", str, ""))
    newer_field = variant(FieldSpec, extra=("comment", str, ""), retype={"type": newer_type})
    newer_schema = variant(
        TableSchema,
        extra=("primary_key", tuple[str, ...], ()),
        retype={"fields": tuple[newer_field, ...]},  # type: ignore[valid-type]
    )
    schema = newer_schema(
        id=3,
        fields=(newer_field(name="s", type=newer_type(kind="string", collation="c"), comment="x"),),
        partition_keys=("s",),
        options={"bucket": "-1"},
        primary_key=("s",),
    )
    decoded = codec.decode(codec.encode(schema, Kind.SCHEMA), TableSchema, Kind.SCHEMA, PATH)
    assert decoded == TableSchema(
        id=3,
        fields=(FieldSpec(name="s", type=TypeSpec(kind="string")),),
        partition_keys=("s",),
        options={"bucket": "-1"},
    )


def test_newer_array_like_manifest_with_extra_trailing_fields_decodes() -> None:
    file_next = variant(DataFileMeta, extra=("checksum", str, ""))
    entry_next = variant(
        ManifestEntry, extra=("deletion_vector", bytes, b""), retype={"file": file_next}
    )
    manifest_next = variant(
        Manifest,
        extra=("stats", dict[str, int], {}),
        retype={"entries": list[entry_next]},  # type: ignore[valid-type]
    )
    current = sample_file()
    entry = entry_next(
        FileKind.ADD, (1, "x"), 2, 4, file_next(*msgspec.structs.astuple(current), "abc"), b"dv"
    )
    data = codec.encode(manifest_next([entry], {"n": 1}), Kind.MANIFEST)
    decoded = codec.decode(data, Manifest, Kind.MANIFEST, PATH)
    assert decoded == Manifest([ManifestEntry(FileKind.ADD, (1, "x"), 2, 4, current)])

    list_next = variant(ManifestFileMeta, extra=("bloom", bytes, b""))
    meta = list_next("m-1", 10, 1, 0, 0, 0, 3, (1,), (2,), (0,), 5, 9, b"bits")
    container = variant(
        ManifestList,
        extra=("note", str, ""),
        retype={"manifests": list[list_next]},  # type: ignore[valid-type]
    )
    decoded_list = codec.decode(
        codec.encode(container([meta], "n"), Kind.MANIFEST_LIST),
        ManifestList,
        Kind.MANIFEST_LIST,
        PATH,
    )
    assert decoded_list == ManifestList(
        [ManifestFileMeta("m-1", 10, 1, 0, 0, 0, 3, (1,), (2,), (0,), 5, 9)]
    )


def test_newer_commit_message_split_and_consumer_decode() -> None:
    message_next = variant(CommitMessage, extra=("origin", str, ""))
    message = CommitMessage(
        partition=(1,), bucket=0, total_buckets=2, schema_id=0, new_files=(sample_file(),)
    )
    newer = message_next(**msgspec.structs.asdict(message), origin="spark")
    assert CommitMessage.from_bytes(codec.encode(newer, Kind.COMMIT_MESSAGE)) == message

    consumer_next = variant(ConsumerState, extra=("owner", str, ""))
    data = codec.encode(consumer_next(next_snapshot=5, time_ms=9, owner="me"), Kind.CONSUMER)
    assert codec.decode(data, ConsumerState, Kind.CONSUMER, PATH) == ConsumerState(
        next_snapshot=5, time_ms=9
    )

    users_next = variant(CommitUserRecord, extra=("host", str, ""))
    container = variant(CommitUsers, retype={"records": list[users_next]})  # type: ignore[valid-type]
    data = codec.encode(container([users_next("u", 3, 4, 5, "o", "h")]), Kind.COMMIT_USERS)
    assert codec.decode(data, CommitUsers, Kind.COMMIT_USERS, PATH) == CommitUsers(
        [CommitUserRecord("u", 3, 4, 5, "o")]
    )
    # records written before the owner existed read with an empty owner
    users_old = variant(CommitUserRecord, keep=4)
    older = variant(CommitUsers, retype={"records": list[users_old]})  # type: ignore[valid-type]
    data = codec.encode(older([users_old("u", 3, 4, 5)]), Kind.COMMIT_USERS)
    decoded = codec.decode(data, CommitUsers, Kind.COMMIT_USERS, PATH)
    assert decoded == CommitUsers([CommitUserRecord("u", 3, 4, 5)])
    assert decoded.records[0].owner == ""


def test_older_shorter_structs_decode_with_defaults() -> None:
    # An older writer knew only the required fields of DataFileMeta (no statistics).
    required = sum(
        1 for f in msgspec.structs.fields(DataFileMeta) if f.default is msgspec.NODEFAULT
    )
    file_old = variant(DataFileMeta, keep=required)
    entry_old = variant(ManifestEntry, retype={"file": file_old})
    manifest_old = variant(Manifest, retype={"entries": list[entry_old]})  # type: ignore[valid-type]
    old = manifest_old([entry_old(0, (), 0, -1, file_old("f", 1, 2, 3, 4, 0, 5, 0))])
    decoded = codec.decode(codec.encode(old, Kind.MANIFEST), Manifest, Kind.MANIFEST, PATH)
    assert decoded.entries[0].file == DataFileMeta("f", 1, 2, 3, 4, 0, 5, 0)
    assert decoded.entries[0].file.min_values == ()
    assert decoded.entries[0].file.null_counts == ()

    # ManifestFileMeta before min_seq / max_seq existed.
    meta_old = variant(ManifestFileMeta, keep=10)
    list_old = variant(ManifestList, retype={"manifests": list[meta_old]})  # type: ignore[valid-type]
    data = codec.encode(list_old([meta_old("m", 1, 1, 0, 0, 0, 0, (), (), ())]), Kind.MANIFEST_LIST)
    meta = codec.decode(data, ManifestList, Kind.MANIFEST_LIST, PATH).manifests[0]
    assert (meta.min_seq, meta.max_seq) == (0, -1)

    # A snapshot before watermark, nonce, commit_users and properties existed.
    snapshot_old = variant(
        Snapshot, keep=[f.name for f in msgspec.structs.fields(Snapshot)].index("watermark")
    )
    fields = {
        k: v
        for k, v in msgspec.structs.asdict(sample_snapshot()).items()
        if k in snapshot_old.__struct_fields__
    }
    decoded_snapshot = codec.decode(
        codec.encode(snapshot_old(**fields), Kind.SNAPSHOT), Snapshot, Kind.SNAPSHOT, PATH
    )
    assert decoded_snapshot == sample_snapshot(watermark=None, properties={})
    assert decoded_snapshot.nonce == ""
    assert decoded_snapshot.commit_users is None
    assert decoded_snapshot.format_version == models.FORMAT_VERSION  # what tables start at

    # A schema written without options or time.
    schema_old = variant(TableSchema, keep=4)
    schema = schema_old(id=1, fields=(FieldSpec(name="a", type=TypeSpec(kind="int8")),))
    decoded_schema = codec.decode(codec.encode(schema, Kind.SCHEMA), TableSchema, Kind.SCHEMA, PATH)
    assert decoded_schema.options == {}
    assert decoded_schema.time_ms == 0

    # A commit message before watermarks existed.
    message_old = variant(CommitMessage, keep=7)
    data = codec.encode(
        message_old(partition=(), bucket=0, total_buckets=-1, schema_id=0), Kind.COMMIT_MESSAGE
    )
    assert CommitMessage.from_bytes(data).max_event_time_ms is None


def test_type_spec_omits_defaults_and_reads_them_back() -> None:
    spec = TypeSpec(kind="timestamp", unit="us")
    assert msgspec.json.encode(spec) == b'{"kind":"timestamp","unit":"us"}'
    field = FieldSpec(name="t", type=spec)
    assert msgspec.json.decode(msgspec.json.encode(field), type=FieldSpec) == field
