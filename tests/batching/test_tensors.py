"""Tensor helpers: NumPy always (it is in the bench/test environment), PyTorch when installed."""

from __future__ import annotations

import asyncio

import pytest

from gpuctl.batching import DynamicBatcher
from gpuctl.batching.tensors import pad_stack, stack, torch_batch_fn, unstack

np = pytest.importorskip("numpy")
NO_TORCH = "torch is not installed: it is optional, not a gpuctl dependency (pip install torch)"


def test_stack_and_unstack_round_trip_numpy():
    items = [np.full((2, 3), i, dtype=np.float32) for i in range(4)]
    batch = stack(items)
    assert batch.shape == (4, 2, 3)
    back = unstack(batch)
    assert len(back) == 4 and all(np.array_equal(a, b) for a, b in zip(back, items))


def test_stack_accepts_lists_and_names_the_odd_item():
    assert stack([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    with pytest.raises(
        ValueError,
        match=r"item 2 of shape \(3,\) with item 0 of shape \(2,\); "
        r"use pad_stack",
    ):
        stack([np.zeros(2), np.zeros(2), np.zeros(3)])
    with pytest.raises(ValueError, match="no items"):
        stack([])


def test_pad_stack_pads_the_first_axis_and_unstack_trims_back():
    items = [np.arange(n * 2, dtype=np.int64).reshape(n, 2) + 1 for n in (3, 1, 4)]
    batch, lengths = pad_stack(items, pad_value=-1)
    assert batch.shape == (3, 4, 2) and batch.dtype == np.int64 and lengths == [3, 1, 4]
    assert batch[1].tolist() == [[1, 2], [-1, -1], [-1, -1], [-1, -1]]
    back = unstack(batch, lengths)
    assert all(np.array_equal(a, b) for a, b in zip(back, items))


def test_pad_stack_promotes_mixed_dtypes_like_stack_instead_of_truncating():
    items = [np.array([1, 2], dtype=np.int64), np.array([0.5], dtype=np.float32)]
    batch, _lengths = pad_stack(items)
    assert batch.dtype == stack([np.zeros(2, np.int64), np.zeros(2, np.float32)]).dtype
    assert batch.tolist() == [[1.0, 2.0], [0.5, 0.0]]


def test_pad_stack_refuses_items_differing_beyond_the_first_axis():
    with pytest.raises(
        ValueError, match=r"item 1 of shape \(2, 5\).*only the first axis may differ"
    ):
        pad_stack([np.zeros((3, 4)), np.zeros((2, 5))])
    with pytest.raises(ValueError, match="item 0: it is a scalar"):
        pad_stack([np.float32(1.0)])


def test_unstack_checks_rows_against_lengths():
    with pytest.raises(ValueError, match="output has 2 rows but 3 lengths"):
        unstack(np.zeros((2, 4)), [1, 2, 3])
    with pytest.raises(ValueError, match="scalar output"):
        unstack(np.float32(0.0))


@pytest.mark.asyncio
async def test_numpy_model_behind_the_batcher_answers_each_request_with_its_own_row():
    weights = np.random.default_rng(1).standard_normal((8, 3)).astype(np.float32)
    seen = []

    def model(items):
        seen.append(len(items))
        return unstack(stack(items) @ weights)

    inputs = [np.random.default_rng(i).standard_normal(8).astype(np.float32) for i in range(10)]
    async with DynamicBatcher(model, max_batch_size=4, max_wait_ms=5) as b:
        outs = await asyncio.wait_for(asyncio.gather(*(b.submit(x) for x in inputs)), 5)
    assert seen == [4, 4, 2]
    for x, out in zip(inputs, outs):
        np.testing.assert_allclose(out, x @ weights, rtol=1e-5)


def test_torch_stack_pad_and_unstack():
    torch = pytest.importorskip("torch", reason=NO_TORCH)
    items = [torch.full((n, 2), float(n)) for n in (2, 3)]
    batch, lengths = pad_stack(items, pad_value=0.5)
    assert isinstance(batch, torch.Tensor) and batch.shape == (2, 3, 2) and lengths == [2, 3]
    assert batch[0, 2].tolist() == [0.5, 0.5]
    assert [t.shape for t in unstack(batch, lengths)] == [(2, 2), (3, 2)]
    assert stack([torch.ones(3), torch.zeros(3)]).shape == (2, 3)
    mixed, _lengths = pad_stack([torch.tensor([1, 2]), torch.tensor([0.5])])  # int64, float32
    assert mixed.dtype == torch.float32 and mixed.tolist() == [[1.0, 2.0], [0.5, 0.0]]
    with pytest.raises(TypeError, match="item 1 is a ndarray, item 0 a torch.Tensor"):
        stack([torch.ones(2), np.ones(2)])


@pytest.mark.asyncio
async def test_torch_batch_fn_matches_the_model_run_one_by_one():
    torch = pytest.importorskip("torch", reason=NO_TORCH)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(6, 4), torch.nn.ReLU(), torch.nn.Linear(4, 3)
    ).eval()
    inputs = [torch.randn(6) for _ in range(7)]
    async with DynamicBatcher(
        torch_batch_fn(model, device="cpu"), max_batch_size=4, max_wait_ms=5
    ) as b:
        outs = await asyncio.wait_for(asyncio.gather(*(b.submit(x) for x in inputs)), 10)
        assert b.metrics().batch_sizes == {4: 1, 3: 1}
    with torch.no_grad():
        for x, out in zip(inputs, outs):
            assert out.shape == (3,) and not out.requires_grad
            torch.testing.assert_close(out, model(x.unsqueeze(0))[0])
