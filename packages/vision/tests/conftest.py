"""Shared test settings of fiamma-vision."""

from hypothesis import HealthCheck, settings

# Hypothesis runs deterministically (CI must not flake): each test's examples come from a seed
# derived from the test itself, with no example database, deadline or timing health check (the
# machine's load must not decide a result). `pytest --hypothesis-profile=explore` draws fresh
# random examples instead, to look for new failures locally.
settings.register_profile("deterministic", derandomize=True, database=None, deadline=None,
                          print_blob=True, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("explore", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("deterministic")
