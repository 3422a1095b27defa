"""A consumer's save that the network delivers late, after its client gave up and the reader
saved a later position: it must not move the consumer back (a restarted reader would deliver
the units in between again). Found by a docs-only hunt through a proxy that held requests.

The proxy (tests/helpers/holding_proxy.py) sits in front of each real emulator, holds the save
request, lets the client time out (``operation_timeout``), and delivers it after the reader's
next save. The store must refuse it (HTTP 412): each save is conditional on the version of the
progress file it replaces."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import appendtable as at
from appendtable.errors import TransientStorageError
from tests.cloud.conftest import CloudStore
from tests.helpers.data import EVENTS, events
from tests.helpers.holding_proxy import HoldingProxy, through_proxy
from tests.streaming.helpers import drain, rows_of, seqs


@pytest.fixture
def proxied(cloud: CloudStore) -> Iterator[tuple[CloudStore, HoldingProxy]]:
    proxy, options = through_proxy(cloud.storage_options)
    yield CloudStore(cloud.name, cloud.uri, {**options, "operation_timeout": 5}), proxy
    proxy.close()


def test_a_save_delivered_late_is_refused_and_the_consumer_keeps_its_later_position(
    proxied: tuple[CloudStore, HoldingProxy],
) -> None:
    cloud, proxy = proxied
    table = at.create_table(
        cloud.uri, EVENTS, options={"write-only": True}, storage_options=cloud.storage_options
    )
    reader = table.stream(mode="latest", consumer_id="c")
    delivered: list[int] = []
    for batch in range(3):
        table.append(events(batch * 10, 10))
        unit = reader.poll()
        assert unit is not None
        delivered += seqs(rows_of(reader, [unit]))
        if batch == 1:  # this save is held: its client gives up
            proxy.hold(b"consumer-c")
            with pytest.raises(TransientStorageError, match="operation_timeout"):
                reader.commit()
        else:
            reader.commit()
    assert delivered == list(range(30))
    assert table.consumers() == {"c": 4}
    assert proxy.deliver() == 412  # the late save reaches the store, which refuses it
    assert table.consumers() == {"c": 4}
    table.append(events(30, 10))
    restarted = at.open_table(cloud.uri, storage_options=cloud.storage_options).stream(
        consumer_id="c"
    )
    (unit,) = drain(restarted)
    assert seqs(rows_of(restarted, [unit])) == list(range(30, 40))  # nothing delivered twice


def test_a_group_members_own_progress_delivered_late_is_adopted_not_fenced(
    proxied: tuple[CloudStore, HoldingProxy],
) -> None:
    """Found by a docs-only hunt: a member's commit failed, its progress record reached the
    store later (before its next commit), and the next commit took that record for another
    member's claim: ConsumerFencedError with no other member, and the rows delivered again."""
    cloud, proxy = proxied
    table = at.create_table(
        cloud.uri,
        EVENTS,
        options={"bucket": 2, "bucket-key": "key", "write-only": True},
        storage_options=cloud.storage_options,
    )
    lease = {"consumer.group.lease-time": "60 s"}
    member = table.stream(group="g", member="m1", poll_interval=0.05, options=lease)
    delivered: list[int] = []
    for batch in range(3):
        table.append(events(batch * 10, 10))
        delivered += seqs(rows_of(member, drain(member)))
        if batch == 1:
            proxy.hold(b"/progress/")
            with pytest.raises(TransientStorageError, match="operation_timeout"):
                member.commit()
            assert proxy.deliver() in (200, 201)  # the record lands now, after the failure
        else:
            member.commit()  # (the third: after the late record)
    member.close()
    assert sorted(delivered) == list(range(30))
    table.append(events(30, 10))
    other = table.stream(group="g", member="m2", poll_interval=0.05, options=lease)
    assert sorted(seqs(rows_of(other, drain(other)))) == list(range(30, 40))  # none again
    other.close()
