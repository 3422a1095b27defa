"""Which streaming query a sink's commits belong to, and what a micro-batch does about it.

A streaming sink commits micro-batch N as (commit user, identifier), and the table skips a
commit whose identifier the user already committed: that is how a batch replayed after a crash
is written once. It is only safe while one query numbers the user's identifiers. A new
checkpoint starts its batch ids at 0 again, so a new query reusing a commit user would have its
batches skipped as "already committed" (Delta's ``txnAppId`` trap). So every commit records its
*owner* with the identifier: the query's id (stable per checkpoint) and ``base``, the first
identifier of that query (identifier = base + batch id). :func:`decide` then tells, for each
batch, before anything is written:

* the same query: a batch id at or below the last committed one is a replay (skipped);
* another query: refused (CommitUserReusedError, saying why and what to do), or with
  ``commitUserReuse`` = ``continue`` taken over: its batches are numbered after the other's;
* an unknown query (Spark Connect's foreachBatch cannot see the query id; records of older
  versions or of batch writes): judged by batch ids alone: a later batch is new, an earlier
  one can only come from another query (Spark replays at most the last batch) and is refused,
  and the last committed batch again is a replay, unless the record names a query while this
  batch cannot say which it is: then it is refused too, asking for the query's identity. The
  one case left that batch ids cannot tell: a new query's batch 0 after a query that
  committed only its batch 0, when neither says which query it is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import fsspec

import appendtable as at

__all__ = ["Commit", "Owner", "Skip", "checkpoint_query_id", "decide"]

_QUERY, _BASE = "query=", "base="


@dataclass(frozen=True)
class Owner:
    """Who numbers a commit user's identifiers: a query (None: not known) and the identifier
    of its batch 0."""

    query: str | None
    base: int = 0

    def text(self) -> str:
        return f"{_QUERY}{self.query or ''};{_BASE}{self.base}"

    @staticmethod
    def parse(text: str) -> Owner:
        """The owner a record names; an empty or foreign text: an unknown query, base 0."""
        fields = dict(part.split("=", 1) for part in text.split(";") if "=" in part)
        try:
            base = int(fields.get("base", "0"))
        except ValueError:
            base = 0
        return Owner(fields.get("query") or None, base)

    def describe(self) -> str:
        return f"streaming query {self.query}" if self.query else "a query that did not say which"


@dataclass(frozen=True)
class Commit:
    """Commit the batch as ``identifier``, recording ``owner``."""

    identifier: int
    owner: Owner


@dataclass(frozen=True)
class Skip:
    """The batch already landed (a replay): write nothing."""

    identifier: int


def decide(
    *,
    user: str,
    batch: int,
    query: str | None,
    record: at.CommitUserRecord | None,
    reuse: str,
    option: str = "commitUserReuse",
) -> Commit | Skip:
    """What micro-batch ``batch`` of ``query`` (None: unknown) does, given the last commit of
    ``user`` (``record``); raises CommitUserReusedError when another query numbers ``user``'s
    identifiers and ``reuse`` is ``fail``. ``option``: how the caller names the reuse setting."""
    if record is None:
        return Commit(batch, Owner(query, 0))
    previous = Owner.parse(record.owner)
    last = record.identifier - previous.base
    if query is not None and previous.query == query:
        return _next(batch, last, previous)
    if query is None and previous.query is not None and batch == last:
        raise at.CommitUserReusedError(_unknown(user, batch, previous))
    if (query is None or previous.query is None) and batch >= last:  # only batch ids tell
        return _next(batch, last, Owner(query, previous.base))
    if reuse == "continue":
        base = record.identifier + 1
        return Commit(base + batch, Owner(query, base))
    raise at.CommitUserReusedError(_refusal(user, batch, query, previous, last, option))


def _next(batch: int, last: int, owner: Owner) -> Commit | Skip:
    identifier = owner.base + batch
    return Skip(identifier) if batch <= last else Commit(identifier, owner)


def _refusal(
    user: str, batch: int, query: str | None, previous: Owner, last: int, option: str
) -> str:
    this = f"this query ({query})" if query else "this query"
    why = (
        f"commit user '{user}' last committed micro-batch {last} of {previous.describe()}, "
        f"and {this} is another one"
        if query is not None and previous.query is not None
        else f"micro-batch {batch} is below micro-batch {last}, the last one commit user "
        f"'{user}' committed, so it comes from another query"
    )
    return (
        f"{why} (a new checkpoint numbers its micro-batches from 0 again): its batch {batch} "
        "would be taken for one already committed and skipped, so nothing was written. Give "
        f"this checkpoint its own commit user (for example '{user}-2'), or, if this query "
        f"takes over from the other one, set {option} to 'continue': its batches are then "
        "committed after the other query's, and where it starts reading is up to its own "
        "start options"
    )


def _unknown(user: str, batch: int, previous: Owner) -> str:
    return (
        f"micro-batch {batch} is either a replay of the last micro-batch commit user '{user}' "
        f"committed (for {previous.describe()}) or the first one of another query, and this "
        "sink cannot see which query it runs in (Spark Connect's foreachBatch): nothing was "
        "written. Give foreach_batch_sink checkpoint_location= (the query's "
        "checkpointLocation), from which it reads the query id"
    )


def checkpoint_query_id(location: str, storage_options: Mapping[str, Any] | None = None) -> str:
    """The id of the streaming query whose checkpoint is at ``location`` (Spark writes it to
    ``<location>/metadata`` when the query first starts)."""
    path = location.rstrip("/") + "/metadata"
    try:
        with fsspec.open(path, "r", **dict(storage_options or {})) as handle:
            first = handle.readline()
        query = json.loads(first)["id"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise at.InvalidOptionError(
            f"cannot read the streaming query id from {path} ({exc}): is '{location}' the "
            "query's checkpointLocation?"
        ) from exc
    if not isinstance(query, str) or not query:
        raise at.InvalidOptionError(f"{path} names no streaming query id")
    return query
