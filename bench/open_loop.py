"""Open-loop load on the admin API for the benchmarks: a request every 1/rate s whatever the
answers (a closed loop would slow down with the server and hide its latency), and the
percentile the benchmarks read from it."""

import asyncio
import time
from collections.abc import Awaitable, Callable

import httpx

Send = Callable[[httpx.AsyncClient, int], Awaitable[httpx.Response]]
"""Sends the ``i``-th request."""


async def open_loop(
    url: str,
    headers: dict[str, str],
    rate: int,
    send: Send,
    *,
    until: Callable[[int], bool],
    connections: int,
) -> tuple[list[tuple[float, float]], int]:
    """Requests by ``send``, one every 1/``rate`` s, until ``until(i)`` is true before the
    ``i``-th; (when each was sent and its latency, on ``time.perf_counter``), and how many
    answered other than 200 or not at all."""
    sent: list[tuple[float, float]] = []
    errors = 0
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    async with httpx.AsyncClient(
        base_url=url, headers=headers, timeout=10, limits=limits
    ) as client:

        async def one(i: int) -> None:
            nonlocal errors
            started = time.perf_counter()
            try:
                errors += (await send(client, i)).status_code != 200
            except httpx.HTTPError:
                errors += 1
            sent.append((started, time.perf_counter() - started))

        tasks = []
        start = time.perf_counter()
        i = 0
        while not until(i):
            delay = start + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(i)))
            i += 1
        await asyncio.gather(*tasks)
    return sent, errors


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(len(ordered) * p), len(ordered) - 1)]
