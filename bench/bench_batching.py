"""Dynamic batching at max_batch_size 1, 8 and 32: capacity, and p50/p99 latency under load.

Default model: a NumPy matmul against a fixed weight matrix on one BLAS thread, whose cost
grows far slower than its batch size (like a GPU's).
- Capacity: a closed loop of 4 x the largest batch size clients, each sending its next
  request as soon as its last is answered, so the batcher never waits for work; requests
  answered per second, median of five runs per batch size taken in turn. Target: batch
  32's capacity >= 1.5x batch 1's.
- Latency: an open-loop load (requests arrive on a Poisson schedule, whether or not earlier
  ones are answered) at two rates set from the model's own speed measured in this run:
  "moderate" (half of what max_batch_size 1 can serve) and "heavy" (3x that, capped below
  what batch 32 can serve). There the requests served per second are capped by the offered
  load, so their ratio is no capacity ratio; p99 shows how each keeps up.

- Against an unbatched handler (the same model, one fn([item]) call per request on the
  same one model thread): capacity under a closed loop of 128 clients, ratio in this run
  (target >= 1.5x), and the median latency one lone client sees with and without the
  batcher (what it adds when there is nobody to batch with: up to max_wait_ms).

`--torch-resnet50` runs the same with a torchvision ResNet-50 (random weights, nothing
downloaded) on CUDA, reported in images per second; it is skipped when torch, torchvision or
a CUDA device is missing.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one model thread: the batcher, not BLAS, is measured

import argparse  # noqa: E402
import asyncio  # noqa: E402
import concurrent.futures  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gpuctl.batching import DynamicBatcher  # noqa: E402
from gpuctl.batching.tensors import stack, torch_batch_fn, unstack  # noqa: E402

TARGET_CAPACITY_RATIO = 1.5


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def direct_cost(fn, item, batch_size: int, min_seconds: float = 0.3) -> float:
    """Median seconds for one fn call on a batch of batch_size, without the batcher."""
    items = [item] * batch_size
    fn(items)  # warm up
    times: list[float] = []
    spent = 0.0
    while spent < min_seconds or len(times) < 5:
        t0 = time.perf_counter()
        fn(items)
        times.append(time.perf_counter() - t0)
        spent += times[-1]
    return statistics.median(times)


async def open_loop(
    fn, item, *, max_batch_size: int, max_wait_ms: float, rate: float, duration: float, seed: int
) -> dict:
    """Offer `rate` requests/s for `duration` s; latency runs from each scheduled arrival."""
    loop = asyncio.get_running_loop()
    rng = random.Random(seed)
    latencies: list[float] = []

    async def one(due: float) -> None:
        await batcher.submit(item)
        latencies.append(loop.time() - due)

    async with DynamicBatcher(
        fn, max_batch_size=max_batch_size, max_wait_ms=max_wait_ms, max_queue=1_000_000
    ) as batcher:
        tasks = []
        start = loop.time()
        due = start + rng.expovariate(rate)
        while due < start + duration:
            if due > loop.time():
                await asyncio.sleep(due - loop.time())
            while due <= loop.time() and due < start + duration:
                tasks.append(asyncio.create_task(one(due)))
                due += rng.expovariate(rate)
        await asyncio.gather(*tasks)
        elapsed = loop.time() - start
        m = batcher.metrics()
    return {
        "served": len(latencies) / elapsed,
        "p50": percentile(latencies, 0.50),
        "p99": percentile(latencies, 0.99),
        "mean_batch": m.mean_batch_size,
        "requests": len(latencies),
    }


async def closed_loop(
    fn, item, *, max_batch_size: int, max_wait_ms: float, clients: int, duration: float
) -> dict:
    """`clients` senders, each awaiting its answer and sending again at once, for `duration`
    s: the requests answered per second then is what the batcher and fn can serve at most."""
    loop = asyncio.get_running_loop()
    answered = 0

    async with DynamicBatcher(
        fn, max_batch_size=max_batch_size, max_wait_ms=max_wait_ms, max_queue=clients
    ) as batcher:
        await batcher.submit(item)  # warm up: the worker thread, the first call of fn
        stop = loop.time() + duration

        async def client() -> None:
            nonlocal answered
            while loop.time() < stop:
                await batcher.submit(item)
                if loop.time() <= stop:
                    answered += 1

        start = loop.time()
        await asyncio.gather(*(client() for _ in range(clients)))
        m = batcher.metrics()
    return {"served": answered / (stop - start), "mean_batch": m.mean_batch_size}


async def overhead_per_request(batch_size: int, n: int = 4000) -> float:
    """Seconds the batcher itself adds per request (no-op sync fn, all requests at once)."""
    async with DynamicBatcher[int, int](
        lambda items: items, max_batch_size=batch_size, max_wait_ms=1, max_queue=n
    ) as batcher:
        t0 = time.perf_counter()
        await asyncio.gather(*(batcher.submit(i) for i in range(n)))
        return (time.perf_counter() - t0) / n


async def unbatched_closed_loop(fn, item, *, clients: int, duration: float) -> float:
    """The reference: a handler without the batcher, each request one fn([item]) call in
    the same one-thread executor (one model thread, as the batcher keeps); requests
    answered per second by CLIENTS closed-loop senders."""
    loop = asyncio.get_running_loop()
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    await loop.run_in_executor(pool, fn, [item])  # warm up
    answered = 0
    stop = loop.time() + duration

    async def client() -> None:
        nonlocal answered
        while loop.time() < stop:
            await loop.run_in_executor(pool, fn, [item])
            if loop.time() <= stop:
                answered += 1

    start = loop.time()
    await asyncio.gather(*(client() for _ in range(clients)))
    pool.shutdown()
    return answered / (stop - start)


async def one_client_latency(fn, item, *, batched: bool, max_wait_ms: float, n: int = 200) -> float:
    """Median seconds per request of one client sending one request at a time: what the
    batcher adds when there is nobody to batch with (it waits up to max_wait_ms)."""
    loop = asyncio.get_running_loop()
    times = []
    if batched:
        async with DynamicBatcher(fn, max_batch_size=32, max_wait_ms=max_wait_ms) as batcher:
            await batcher.submit(item)
            for _ in range(n):
                t0 = time.perf_counter()
                await batcher.submit(item)
                times.append(time.perf_counter() - t0)
        return statistics.median(times)
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    await loop.run_in_executor(pool, fn, [item])
    for _ in range(n):
        t0 = time.perf_counter()
        await loop.run_in_executor(pool, fn, [item])
        times.append(time.perf_counter() - t0)
    pool.shutdown()
    return statistics.median(times)


def unbatched_suite(fn, item, unit: str, max_wait_ms: float, duration: float) -> bool:
    """The batcher (max_batch_size 32) against the same model behind a handler that does
    not batch, in this run: capacity under a closed loop of 128 clients, and the latency
    one lone client sees."""
    clients = 128
    plain = asyncio.run(unbatched_closed_loop(fn, item, clients=clients, duration=duration))
    batched = asyncio.run(
        closed_loop(
            fn, item, max_batch_size=32, max_wait_ms=max_wait_ms, clients=clients,
            duration=duration,
        )
    )["served"]  # fmt: skip
    alone_plain = asyncio.run(one_client_latency(fn, item, batched=False, max_wait_ms=max_wait_ms))
    alone = asyncio.run(one_client_latency(fn, item, batched=True, max_wait_ms=max_wait_ms))
    ratio = batched / plain
    ok = ratio >= TARGET_CAPACITY_RATIO
    print(
        f"vs an unbatched handler ({clients} clients, closed loop): {batched:,.0f} vs "
        f"{plain:,.0f} {unit}/s, x{ratio:.2f} (target >= {TARGET_CAPACITY_RATIO}) "
        f"{'OK' if ok else 'MISSED'}"
    )
    print(
        f"one lone client, median latency: batched {alone * 1e3:.2f} ms vs unbatched "
        f"{alone_plain * 1e3:.2f} ms: the batcher adds {(alone - alone_plain) * 1e3:.2f} ms "
        f"(its max_wait_ms is {max_wait_ms:g}: a lone request waits that long for company)"
    )
    return ok


def run_suite(
    fn, item, *, unit: str, batch_sizes: list[int], max_wait_ms: float, duration: float
) -> bool:
    print(
        "batcher overhead (no-op fn): "
        + "  ".join(
            f"batch {bs}: {asyncio.run(overhead_per_request(bs)) * 1e6:.0f} us/request"
            for bs in batch_sizes
        )
    )
    costs = {bs: direct_cost(fn, item, bs) for bs in batch_sizes}
    print(
        "direct fn cost (no batcher, median): "
        + "  ".join(
            f"batch {bs}: {c * 1000:.2f} ms = {bs / c:,.0f} {unit}/s" for bs, c in costs.items()
        )
    )
    ok = capacity_suite(fn, item, unit, batch_sizes, max_wait_ms, duration, costs)
    latency_suite(fn, item, unit, batch_sizes, max_wait_ms, duration, costs)
    return ok


def capacity_suite(fn, item, unit, batch_sizes, max_wait_ms, duration, costs, rounds=5) -> bool:
    """Closed-loop capacity of each batch size, the median of `rounds` runs taken in turn
    (so a machine that gets busier mid-way slows every batch size alike), beside what fn
    alone serves at that batch size; True when the largest batch size meets the target."""
    base, top = min(batch_sizes), max(batch_sizes)
    clients = 4 * top
    print(
        f"capacity: closed loop, {clients} clients, median of {rounds} runs of {duration:g} s "
        f"taken in turn, max_wait_ms={max_wait_ms:g}; ratios vs max_batch_size {base}"
    )
    runs: dict[int, list[dict]] = {bs: [] for bs in batch_sizes}
    for _ in range(rounds):
        for bs in batch_sizes:
            runs[bs].append(
                asyncio.run(
                    closed_loop(
                        fn,
                        item,
                        max_batch_size=bs,
                        max_wait_ms=max_wait_ms,
                        clients=clients,
                        duration=duration,
                    )
                )
            )
    capacity = {bs: statistics.median(r["served"] for r in rs) for bs, rs in runs.items()}
    print(
        f"{'max_batch':>9}{f'{unit}/s':>12}{'mean batch':>12}{'ratio':>9}"
        f"{'fn alone':>10}   runs, {unit}/s"
    )
    for bs, rs in runs.items():
        print(
            f"{bs:>9}{capacity[bs]:>12,.0f}{statistics.median(r['mean_batch'] for r in rs):>12.1f}"
            f"{capacity[bs] / capacity[base]:>8.2f}x{bs / costs[bs]:>10,.0f}   "
            + " ".join(f"{r['served']:,.0f}" for r in rs)
        )
    ratio = capacity[top] / capacity[base]
    ok = ratio >= TARGET_CAPACITY_RATIO
    print(
        f"capacity: batch {top} serves {ratio:.2f}x batch {base} "
        f"(target >= {TARGET_CAPACITY_RATIO}) {'OK' if ok else 'MISSED'}"
    )
    return ok


def latency_suite(fn, item, unit, batch_sizes, max_wait_ms, duration, costs) -> None:
    """Open-loop latency at a moderate and a heavy rate, set from the direct fn costs."""
    capacity = {bs: bs / c for bs, c in costs.items()}
    base = min(batch_sizes)
    loads = [
        ("moderate", 0.5 * capacity[base]),
        ("heavy", min(3 * capacity[base], 0.7 * max(capacity.values()))),
    ]
    print(
        f"open loop, Poisson arrivals for {duration:g} s, max_wait_ms={max_wait_ms:g}; "
        f"ratios vs max_batch_size {base} under the same load (served is capped by the load)"
    )
    print(
        f"{'load':<18}{'max_batch':>9}{f'{unit}/s':>12}{'p50 ms':>10}{'p99 ms':>10}"
        f"{'mean batch':>12}{'served ratio':>14}{'p99 ratio':>11}"
    )
    for name, rate in loads:
        ref = None
        for bs in batch_sizes:
            r = asyncio.run(
                open_loop(
                    fn,
                    item,
                    max_batch_size=bs,
                    max_wait_ms=max_wait_ms,
                    rate=rate,
                    duration=duration,
                    seed=bs,
                )
            )
            ref = ref or r
            label = f"{name} {rate:,.0f}/s"
            print(
                f"{label:<18}{bs:>9}{r['served']:>12,.0f}{r['p50'] * 1000:>10.1f}"
                f"{r['p99'] * 1000:>10.1f}{r['mean_batch']:>12.1f}"
                f"{r['served'] / ref['served']:>13.2f}x{r['p99'] / ref['p99']:>10.3g}x",
                flush=True,
            )


def numpy_model(dim: int):
    import numpy as np

    weights = np.random.default_rng(0).standard_normal((dim, dim), dtype=np.float32)
    weights /= np.sqrt(dim)

    def fn(items):
        return unstack(np.tanh(stack(items) @ weights))

    return fn, np.ones(dim, dtype=np.float32)


def resnet50(args) -> int:
    try:
        import torch
        import torchvision
    except Exception as e:  # noqa: BLE001 - a torchvision built for another torch raises RuntimeError
        print(
            f"skipped --torch-resnet50: needs torch and a matching torchvision "
            f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
        )
        return 0
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("skipped --torch-resnet50: torch sees no CUDA device (use --device cpu to force)")
        return 0
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True  # fixed input shape: let cuDNN pick its fastest kernels
    model = torchvision.models.resnet50(weights=None).eval().to(args.device)  # random weights
    name = torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu"
    print(f"ResNet-50 (random weights), fp32, 3x224x224 inputs, on {name}")
    ok = run_suite(
        torch_batch_fn(model, device=args.device),
        torch.randn(3, 224, 224),
        unit="images",
        batch_sizes=args.batch_sizes,
        max_wait_ms=args.max_wait_ms,
        duration=args.duration,
    )
    return 0 if ok else 2


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--torch-resnet50",
        action="store_true",
        help="ResNet-50 in PyTorch instead of the NumPy model (GPU machine)",
    )
    ap.add_argument("--device", default="cuda", help="--torch-resnet50 device (default cuda)")
    ap.add_argument("--dim", type=int, default=4096, help="NumPy model width (default 4096)")
    ap.add_argument(
        "--batch-sizes", default="1,8,32", type=lambda s: sorted(int(x) for x in s.split(","))
    )
    ap.add_argument("--max-wait-ms", type=float, default=5.0)
    ap.add_argument("--duration", type=float, default=2.0, help="seconds of arrivals per run")
    args = ap.parse_args()
    if args.torch_resnet50:
        return resnet50(args)
    try:
        fn, item = numpy_model(args.dim)
    except ImportError:
        print("numpy is not installed (pip install '.[bench]'); cannot run the model")
        return 1
    print(f"model: tanh(x @ W), W {args.dim}x{args.dim} float32, NumPy on one BLAS thread")
    ok = run_suite(
        fn,
        item,
        unit="req",
        batch_sizes=args.batch_sizes,
        max_wait_ms=args.max_wait_ms,
        duration=args.duration,
    )
    ok = unbatched_suite(fn, item, "req", args.max_wait_ms, args.duration) and ok
    return 0 if ok else 2


if __name__ == "__main__":
    sys.exit(main())
