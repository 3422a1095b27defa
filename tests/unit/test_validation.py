"""The checks of decoded metadata (appendtable/commit/validation.py): the fast test over all
paths of a manifest never lets through a path the rule refuses."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from appendtable.commit.validation import _plainly_contained, data_path_problem

_PIECES = st.sampled_from(
    [
        "a",
        "day=1",
        "bucket-0",
        "data-1.parquet",
        "..",
        ".",
        "",
        "/",
        "\\",
        ":",
        "\x00",
        "\n",
        "schema",
        "snapshot",
        "metadata",
        "manifest",
        ".parquet",
        "s3:",
        "C:",
        "x.txt",
        "_staging",
    ]
)
_PATHS = st.lists(_PIECES, min_size=0, max_size=6).map("".join) | st.text(max_size=30)


@settings(max_examples=2000, deadline=None)
@given(st.lists(_PATHS, min_size=1, max_size=8), st.lists(_PATHS, max_size=3))
def test_the_fast_check_never_passes_a_refused_path(good: list[str], extra: list[str]) -> None:
    paths = [*good, *extra]
    if _plainly_contained(paths):
        assert all(data_path_problem(p) is None for p in paths), paths


def test_the_fast_check_passes_ordinary_data_paths() -> None:
    paths = [
        f"day=2024-01-0{d}/bucket-{b}/data-{d}{b}-0.parquet" for d in range(9) for b in range(4)
    ]
    assert _plainly_contained(paths)
    assert not _plainly_contained([*paths, "day=1/../../x.parquet"])
    assert not _plainly_contained([*paths, "bucket-0/x.txt"])
