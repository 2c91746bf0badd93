"""Shared pytest set-up: a headless matplotlib backend and the hypothesis profiles."""

import os

import matplotlib

matplotlib.use("Agg")

from hypothesis import HealthCheck, settings  # noqa: E402

# "default": fast enough for every run; "ci": more examples, picked with
# HYPOTHESIS_PROFILE=ci. No deadline: the first call into torch can be slow.
settings.register_profile(
    "default", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "ci", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
