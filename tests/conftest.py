"""Shared fixtures: a real database per backend, the app, and a small fixture bank.

Every database test runs on a real SQLite file, and again on PostgreSQL when
DDPDRILL_TEST_DATABASE_URL is set (CI sets it). Each test session (each xdist worker)
works in its own SQLite file and its own PostgreSQL database, so parallel runs do not
collide, not even in PostgreSQL's notifications.

Two ways to a session, named for what they do: `db_session` is rolled back after the test
and seen by nothing else (services tested alone); `session_factory` commits for real, so
the app, workers and other sessions see it, and empties the database after the test. The
fixture bank is loaded only where a test asks for it (`loaded`, or `client`).
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pwdlib import PasswordHash
from pwdlib.hashers.argon2 import Argon2Hasher
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker
from typer.testing import CliRunner

from app.accounts import passwords
from app.clock import FixedClock
from app.db import make_engine, make_sessionmaker
from app.main import create_app
from app.migrate import upgrade
from app.questions.bank import load_bank
from app.questions.service import import_bank
from app.settings import Settings, get_settings
from tests.databases import backends, empty, scratch_pg_database, scratch_pg_schema
from tests.factories import FIXTURE_BANK, T0, VARIANT_BANK, Account, create_account, import_folder, login
from tests.servers import Server

# The command line's consoles (rich) take COLUMNS for good if it is set when they are made,
# and an xdist worker starts with COLUMNS=80. Unset, they read it at each print: tests get 200
# columns (wide_console below), and a test may ask for more.
os.environ.pop("COLUMNS", None)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """How `--dist loadscope` (scripts/test) spreads the tests over xdist's workers: one test
    at a time to whichever worker is free, except that the tests of a module with
    module-scoped fixtures (the browser tests' servers, a module's gloo runs) stay on one
    worker, so that those fixtures are made once."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    tests = config.rootpath / "tests"
    together = {path.relative_to(config.rootpath).as_posix() for path in tests.rglob("test_*.py")
                if _MODULE_SCOPED.search(path.read_text(encoding="utf-8"))}

    class ModulesWithTheirFixtures(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return path if path in together else nodeid

    return ModulesWithTheirFixtures(config, log)


_MODULE_SCOPED = re.compile(r"""scope=["'](module|class|package)["']""")


@pytest.fixture(params=backends())
def fresh_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database of the test's own, not migrated (migration tests start from it;
    the shared test database stays at head)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'm.db'}"
        return
    with scratch_pg_schema("m") as url:
        yield url


@pytest.fixture
def cli_env(database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    """The `ddpdrill` command's runner, pointed at the test database."""
    monkeypatch.setenv("DDPDRILL_DATABASE_URL", database_url)
    monkeypatch.setenv("DDPDRILL_DATA_DIR", str(tmp_path / "data"))
    get_settings.cache_clear()
    yield CliRunner()
    get_settings.cache_clear()


@pytest.fixture(scope="session", params=backends())
def database_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A migrated, empty database: an SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        path = tmp_path_factory.mktemp("db") / "test.db"
        url = f"sqlite:///{path}"
        upgrade(url)
        yield url
        return
    with scratch_pg_database("ddpdrill_test") as url:
        upgrade(url)
        yield url


@pytest.fixture(scope="session")
def db_engine(database_url: str) -> Iterator[Engine]:
    engine = make_engine(database_url)
    yield engine
    engine.dispose()


@pytest.fixture
def session_factory(db_engine: Engine) -> Iterator[sessionmaker[Session]]:
    """Sessions whose commits are real: the app, a worker, a subprocess or another session
    sees them. The database is emptied after the test. What asks for the app
    (`app_client`, `client`, ...) or a server uses this one."""
    yield make_sessionmaker(db_engine)
    empty(db_engine)


@pytest.fixture
def db_session(request: pytest.FixtureRequest, db_engine: Engine) -> Iterator[Session]:
    """One session inside an outer transaction that is rolled back after the test: its
    commits are savepoints, so nothing needs deleting, and nothing else sees what it wrote.

    For a test of services alone. A test that needs its writes seen (by the app, a worker,
    another session) asks for `session_factory` instead; asking for both is an error, since
    the app would never see this session's rows."""
    if "session_factory" in request.fixturenames:
        pytest.fail("db_session is rolled back and seen by nothing else; this test also uses "
                    "session_factory (directly or through the app or a server): use session_factory "
                    "for its sessions too", pytrace=False)
    with db_engine.connect() as connection:
        outer = connection.begin()
        session = Session(bind=connection, expire_on_commit=False,
                          join_transaction_mode="create_savepoint")
        try:
            yield session
        finally:
            session.close()
            outer.rollback()


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Settings:
    return Settings(database_url=database_url, secret_key="test-secret-" + uuid.uuid4().hex,
                    data_dir=tmp_path / "data", bank_dir=FIXTURE_BANK, workers=0)


@pytest.fixture
def app_client(settings: Settings, session_factory: sessionmaker[Session]) -> Iterator[TestClient]:
    """The app on the test database, with no question loaded."""
    with TestClient(create_app(settings)) as client:
        yield client


@pytest.fixture
def loaded(session_factory: sessionmaker[Session]) -> None:
    """Import the fixture bank."""
    bank = load_bank(FIXTURE_BANK)
    assert bank.ok, bank.errors
    with session_factory.begin() as session:
        import_bank(db_session=session, bank=bank)


@pytest.fixture
def client(app_client: TestClient, loaded: None) -> TestClient:
    """The app with the fixture bank loaded."""
    return app_client


@pytest.fixture
def variant_client(app_client: TestClient, session_factory: sessionmaker[Session]) -> TestClient:
    """The app with the variant bank loaded (variables, a case, a talk-through), its clock
    standing at T0 until a test moves it (app.state.clock)."""
    import_folder(session_factory, VARIANT_BANK)
    app_client.app.state.clock = FixedClock(T0)  # type: ignore[attr-defined]
    return app_client


@pytest.fixture(autouse=True, scope="session")
def wide_console() -> Iterator[None]:
    """The command line's tables as tests read them: 200 columns wide, whether pytest runs
    in a terminal or not (rich would take 80 and wrap)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COLUMNS", "200")
        yield


@pytest.fixture(autouse=True)
def fast_hasher(monkeypatch: pytest.MonkeyPatch) -> None:
    """argon2id still, with tiny costs: the recommended ones take ~0.2 s per hash."""
    monkeypatch.setattr(passwords, "password_hasher",
                        PasswordHash((Argon2Hasher(time_cost=1, memory_cost=1024, parallelism=1),)))


@pytest.fixture
def make_user(session_factory: sessionmaker[Session]) -> Callable[..., Account]:
    """Creates an account (committed) and returns its id, name and role."""
    return lambda *args, **kwargs: create_account(session_factory, *args, **kwargs)


@pytest.fixture
def new_client(app_client: TestClient) -> Iterator[Callable[..., TestClient]]:
    """More browsers on the same app, each with its own cookies."""
    made: list[TestClient] = []

    def make(base_url: str = "http://testserver") -> TestClient:
        client = TestClient(app_client.app, base_url=base_url)
        made.append(client)
        return client

    yield make
    for c in made:
        c.close()


@pytest.fixture
def author(make_user: Callable[..., Account]) -> Account:
    return make_user("alice", "author")


@pytest.fixture
def admin(make_user: Callable[..., Account]) -> Account:
    return make_user("root", "admin")


@pytest.fixture
def author_client(new_client: Callable[..., TestClient], author: Account) -> TestClient:
    client = new_client()
    assert login(client, author.username).status_code == 303
    return client


@pytest.fixture
def admin_client(new_client: Callable[..., TestClient], admin: Account) -> TestClient:
    client = new_client()
    assert login(client, admin.username).status_code == 303
    return client


@pytest.fixture
def clock(app_client: TestClient) -> FixedClock:
    """The app's clock, standing at T0 until a test advances it (the bank is not loaded:
    ask for `client` as well for that)."""
    fixed = FixedClock(T0)
    app_client.app.state.clock = fixed  # type: ignore[attr-defined]
    return fixed


@pytest.fixture
def browser_client(new_client: Callable[..., TestClient], client: TestClient) -> TestClient:
    """Another browser on the same (loaded) app."""
    return new_client()


@pytest.fixture
def server(database_url: str, loaded: None, tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """Starts `ddpdrill serve` processes on the test database (fixture bank loaded)."""
    started: list[Server] = []

    def start(**env: str) -> Server:
        s = Server(database_url, tmp_path, {f"DDPDRILL_{k.upper()}": v for k, v in env.items()}).start()
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()
