import warnings

import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long-running (the whole vision zoo)")


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        yield
