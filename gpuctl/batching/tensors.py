"""Turn a batch's items into one tensor and the model's output back into one result per item.

Works on NumPy arrays and PyTorch tensors. Neither library is a dependency of gpuctl: torch
is only touched when the items already are torch tensors (so the caller imported it), numpy
only when they are not; `torch_batch_fn` imports torch when called.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence
from typing import Any


def stack(items: Sequence[Any]) -> Any:
    """Stack same-shape arrays/tensors into one batch along a new first axis."""
    lib, items = _backend(items)
    first = tuple(items[0].shape)
    for i, x in enumerate(items):
        if tuple(x.shape) != first:
            raise ValueError(
                f"cannot stack item {i} of shape {tuple(x.shape)} with item 0 of shape "
                f"{first}; use pad_stack() for items of different lengths"
            )
    return lib.stack(items)


def pad_stack(items: Sequence[Any], pad_value: float = 0) -> tuple[Any, list[int]]:
    """Pad items along their first axis to the longest one, then stack them.

    Returns (batch, lengths): batch has shape (n, longest, *rest); lengths[i] is item i's own
    length, for building an attention mask and for `unstack(output, lengths)`.
    """
    lib, items = _backend(items)
    rest = tuple(items[0].shape[1:])
    for i, x in enumerate(items):
        if x.ndim == 0:
            raise ValueError(f"cannot pad item {i}: it is a scalar; pad_stack pads the first axis")
        if tuple(x.shape[1:]) != rest:
            raise ValueError(
                f"cannot pad item {i} of shape {tuple(x.shape)} with item 0 of shape "
                f"{tuple(items[0].shape)}: only the first axis may differ"
            )
    lengths = [int(x.shape[0]) for x in items]
    longest = max(lengths)
    # the dtype stack() would give: item 0's alone would silently truncate wider items
    dtype = functools.reduce(lib.promote_types, (x.dtype for x in items))
    if lib.__name__ == "torch":
        batch = items[0].new_full((len(items), longest, *rest), pad_value, dtype=dtype)
    else:
        batch = lib.full((len(items), longest, *rest), pad_value, dtype=dtype)
    for i, x in enumerate(items):
        batch[i, : lengths[i]] = x
    return batch, lengths


def unstack(batch: Any, lengths: Sequence[int] | None = None) -> list[Any]:
    """Split a model's batched output into one result per item (trimmed to `lengths` if given)."""
    n = int(batch.shape[0]) if getattr(batch, "ndim", 0) else None
    if n is None:
        raise ValueError("cannot unstack a scalar output: the model must return one row per item")
    if lengths is None:
        return [batch[i] for i in range(n)]
    if len(lengths) != n:
        raise ValueError(f"output has {n} rows but {len(lengths)} lengths were given")
    return [batch[i, : lengths[i]] for i in range(n)]


def torch_batch_fn(
    model: Callable[[Any], Any], *, device: Any = None, to_cpu: bool = True
) -> Callable[[list[Any]], list[Any]]:
    """A sync batch function for DynamicBatcher around a PyTorch model taking same-shape inputs.

    Stacks the items, moves the batch to `device`, runs the model under
    `torch.inference_mode()`, and splits the output into one tensor per item (moved back to
    the CPU unless `to_cpu=False`).
    """
    import torch  # only when asked for: torch is not a dependency of gpuctl

    def run(items: list[Any]) -> list[Any]:
        batch = stack(items)
        if device is not None:
            batch = batch.to(device, non_blocking=True)
        with torch.inference_mode():
            out = model(batch)
        if to_cpu:
            out = out.cpu()
        return unstack(out)

    return run


def _backend(items: Sequence[Any]) -> tuple[Any, list[Any]]:
    if len(items) == 0:
        raise ValueError("cannot build a batch from no items")
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(items[0], torch.Tensor):
        for i, x in enumerate(items):
            if not isinstance(x, torch.Tensor):
                raise TypeError(f"item {i} is a {type(x).__name__}, item 0 a torch.Tensor")
        return torch, list(items)
    import numpy

    return numpy, [numpy.asarray(x) for x in items]
