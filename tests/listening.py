"""Helpers for tests that run a server in a subprocess on a loopback port."""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


def free_port() -> int:
    """A loopback port that was free a moment ago (the server binds it next)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def wait_listening(port: int, process: asyncio.subprocess.Process) -> None:
    """Wait until ``process`` accepts connections on ``port``, or fail if it exits first."""
    # Readiness, not a race fix: the port accepts connections once the app serves.
    for _ in range(300):
        if process.returncode is not None:
            raise RuntimeError("server exited early")
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            await asyncio.sleep(0.1)
    raise TimeoutError("server did not start")


@asynccontextmanager
async def serving(database: str, env: dict[str, str], count: int = 2) -> AsyncIterator[list[int]]:
    """``count`` ``treasury serve`` processes on ``database`` with ``env``: their ports, each
    accepting connections; stopped (SIGINT, as an operator would) on exit."""
    ports = [free_port() for _ in range(count)]
    processes: list[asyncio.subprocess.Process] = []
    try:
        for port in ports:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "treasury_aiohttp.cli", "serve", "--port", str(port),
                "--database", database, env=env,
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
            )  # fmt: skip
            processes.append(process)
            await wait_listening(port, process)
        yield ports
    finally:
        for process in processes:
            if process.returncode is None:
                process.send_signal(signal.SIGINT)
                await asyncio.wait_for(process.wait(), 60)
