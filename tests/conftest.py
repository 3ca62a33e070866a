import pytest

from store import Store


class FakeClock:
    """A clock tests move by hand, so leases and ttls lapse without sleeping."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def st(tmp_path, clock):
    store = Store.open(tmp_path / "qm", create=True, name="qm1", clock=clock)
    store.create_queue("q")
    yield store
    assert store.check() == []
    store.close()


# ---- CLI tests (tests/test_cli_*.py) -------------------------------------------------------

@pytest.fixture
def cli(tmp_path):
    """`mqcli` bound to a fresh store under tmp_path (via MQCLI_STORE), with a queue `q`."""
    from cli_helpers import Cli

    runner = Cli(tmp_path / "store", tmp_path / "xdg")
    runner.ok("queue", "create", "q", "-q")
    return runner
