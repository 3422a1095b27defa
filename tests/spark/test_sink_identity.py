"""The streaming sinks' commit identity (appendtable_spark.identity), no session: queries,
crashes, replays and new checkpoints reusing a commit user, against a model of what must be
committed. A batch is committed once; a replay is skipped; a new query's batch is never
skipped: it is refused before anything is written, or, when allowed to take over, committed."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pyspark")

import appendtable as at
from appendtable_spark import foreach_batch_sink
from appendtable_spark.identity import Commit, Owner, Skip, checkpoint_query_id, decide


@dataclass
class Sink:
    """A table's record of one commit user, and what landed."""

    record: at.CommitUserRecord | None = None
    landed: list[tuple[str | None, int]] = field(default_factory=list)  # (query, batch)

    def attempt(self, query: str | None, seen: str | None, batch: int, reuse: str) -> str:
        """One attempt at micro-batch ``batch`` of ``query`` (``seen``: the id the sink can
        see, None under Spark Connect): ``committed``, ``skipped`` or ``refused``."""
        try:
            decision = decide(user="u", batch=batch, query=seen, record=self.record, reuse=reuse)
        except at.CommitUserReusedError:
            return "refused"
        if isinstance(decision, Skip):
            return "skipped"
        assert isinstance(decision, Commit)
        if self.record is not None:
            assert decision.identifier > self.record.identifier  # the core would skip it
        self.record = at.CommitUserRecord(
            "u", decision.identifier, 0, int(time.time() * 1000), decision.owner.text()
        )
        self.landed.append((query, batch))
        return "committed"


queries = st.lists(
    st.tuples(
        st.integers(1, 5),  # batches
        st.lists(st.integers(0, 4), max_size=3),  # batches replayed after a crash
        st.booleans(),  # the query id is visible (classic Spark)
        st.sampled_from(["fail", "continue"]),
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=300, deadline=None)
@given(queries)
def test_batches_land_once_and_new_queries_are_never_skipped(plan: list[object]) -> None:
    sink = Sink()
    for number, (batches, replays, visible, reuse) in enumerate(plan):  # type: ignore[misc]
        query = f"q{number}"
        seen = query if visible else None
        committed_any = False
        for batch in range(batches):
            before = sink.record
            outcome = sink.attempt(query, seen, batch, reuse)
            if outcome == "refused":
                # only a query that is not the one numbering the user's identifiers
                assert before is not None and not committed_any
                assert (query, batch) not in sink.landed
                break
            if outcome == "skipped":
                # the one case batch ids cannot tell (documented): the previous query did not
                # say which it was, and committed only its batch 0
                assert before is not None and not committed_any and batch == 0
                previous = Owner.parse(before.owner)
                assert previous.query is None and before.identifier - previous.base == 0
                continue
            committed_any = True
            if batch in replays:  # crash after the table commit: Spark replays the batch
                assert sink.attempt(query, seen, batch, reuse) == "skipped"
    assert len(set(sink.landed)) == len(sink.landed)  # nothing landed twice


def test_a_known_new_query_is_refused_with_what_to_do() -> None:
    first = at.CommitUserRecord("pipeline-a", 41, 9, 0, Owner("q-old", 0).text())
    with pytest.raises(at.CommitUserReusedError) as caught:
        decide(user="pipeline-a", batch=0, query="q-new", record=first, reuse="fail")
    message = str(caught.value)
    assert "micro-batch 41 of streaming query q-old" in message
    assert "'pipeline-a-2'" in message and "commitUserReuse" in message
    taken = decide(user="pipeline-a", batch=3, query="q-new", record=first, reuse="continue")
    assert taken == Commit(45, Owner("q-new", 42))
    # the same query goes on numbering from its base; a replay is skipped
    mine = at.CommitUserRecord("pipeline-a", 45, 10, 0, taken.owner.text())
    assert decide(user="pipeline-a", batch=3, query="q-new", record=mine, reuse="fail") == Skip(45)
    assert decide(user="pipeline-a", batch=4, query="q-new", record=mine, reuse="fail") == Commit(
        46, Owner("q-new", 42)
    )
    # a sink that cannot see its query (Spark Connect) does not take the last batch of a
    # known query for its own replay
    with pytest.raises(at.CommitUserReusedError, match="checkpoint_location="):
        decide(user="pipeline-a", batch=41, query=None, record=first, reuse="fail")
    assert decide(user="pipeline-a", batch=42, query=None, record=first, reuse="fail") == Commit(
        42, Owner(None, 0)
    )
    # a record of a batch write (no owner): batch ids decide
    plain = at.CommitUserRecord("pipeline-a", 7, 3, 0)
    with pytest.raises(at.CommitUserReusedError, match="below micro-batch 7"):
        decide(user="pipeline-a", batch=2, query="q", record=plain, reuse="fail")


def test_the_query_id_is_read_from_a_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "metadata").write_text('{"id":"4b1f-query"}\n')
    assert checkpoint_query_id(str(tmp_path)) == "4b1f-query"
    with pytest.raises(at.InvalidOptionError, match="checkpointLocation"):
        checkpoint_query_id(str(tmp_path / "missing"))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"commit_user_reuse": "sometimes"}, "commitUserReuse.*fail, continue"),
        ({"options": {"commitIdentifier": "3"}}, "numbers its commits itself"),
        ({"options": {"comitUser": "a"}}, "did you mean 'commitUser'"),
        (
            {"options": {"commitUserReuse": "fail"}, "commit_user_reuse": "continue"},
            "not both",
        ),
        ({"options": {"commitUser": "a"}, "commit_user": "b"}, "not both"),
    ],
)
def test_foreach_batch_sink_checks_its_settings_when_defined(
    tmp_path: Path, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(at.AppendTableError, match=message):
        foreach_batch_sink(str(tmp_path / "t"), **kwargs)  # type: ignore[arg-type]
