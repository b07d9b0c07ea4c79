"""The CRD schema check the tests validate custom resources with: gpuctl.sim.crd_schema
(shipped with the API emulator for `gpuctl sandbox`)."""

from gpuctl.sim.crd_schema import (
    CRD_DIR,
    CRD_FILES,
    assert_valid_cr,
    cel_errors,
    crd,
    errors,
    read_crd,
    validator,
    validator_of,
)

__all__ = [
    "CRD_DIR",
    "CRD_FILES",
    "assert_valid_cr",
    "cel_errors",
    "crd",
    "errors",
    "read_crd",
    "validator",
    "validator_of",
]
