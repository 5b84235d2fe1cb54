"""Fixtures shared by the golden tests (the ``impl`` fixture comes from the plugin)."""

import pytest
import torch


@pytest.fixture(params=[torch.float32, pytest.param(torch.float64, marks=pytest.mark.needs("float64"))],
                ids=["float32", "float64"])
def dtype(request) -> torch.dtype:
    """Every numeric test runs in float32 and float64 (float32 only under a profile lacking float64)."""
    return request.param
