"""Helpers for tests that run a server in a subprocess on a loopback port."""

from __future__ import annotations

import asyncio
import socket


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
