"""Dynamic request batching for inference servers: many `await submit(item)` -> one `fn(items)`.

Library code: imports only the standard library (tensor helpers import numpy or torch when
called), so nothing here slows `gpuctl --help`.
"""

from gpuctl.batching.batcher import (
    BatcherClosed,
    BatchingError,
    BatchResultError,
    DynamicBatcher,
)
from gpuctl.batching.metrics import BatcherMetrics

__all__ = ["BatcherClosed", "BatchingError", "BatchResultError", "BatcherMetrics", "DynamicBatcher"]
