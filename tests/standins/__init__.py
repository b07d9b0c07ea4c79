"""Real stand-ins for outside systems, started for tests (see ../shared/reference/TEST-STANDINS.md)."""

import os
from typing import NoReturn

import pytest


def missing(reason: str) -> NoReturn:
    """A stand-in is not installed: skip the test, or fail it where stand-ins are required
    (GPUCTL_REQUIRE_STANDINS=1, set by CI) so that a missing one cannot pass unnoticed."""
    if os.environ.get("GPUCTL_REQUIRE_STANDINS") == "1":
        pytest.fail(f"{reason}; GPUCTL_REQUIRE_STANDINS=1 requires it", pytrace=False)
    pytest.skip(reason)
