"""What the figures were measured on, printed above the table."""

from __future__ import annotations

import os
import platform
import sqlite3
import tempfile
from pathlib import Path


def cpu_model() -> str:
    """The CPU model from ``/proc/cpuinfo`` (or the platform's processor string)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def temp_disk() -> str:
    """The block device under the temp dir (where the SQLite files go) and its rotational flag."""
    try:
        st = os.stat(tempfile.gettempdir())
        device = Path(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}").resolve()
        queue = device / "queue" if (device / "queue").exists() else device.parent / "queue"
        rotational = (queue / "rotational").read_text().strip()
        return f"{device.name} (queue/rotational={rotational})"
    except OSError:
        return "unknown"


def load() -> str:
    """The 1/5/15-minute load averages (other work on the machine skews the figures)."""
    if not hasattr(os, "getloadavg"):
        return "unknown"
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def describe(postgres_version: str | None) -> list[str]:
    """Lines describing the machine and software versions."""
    import psycopg
    import sqlalchemy

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return [
        f"CPU: {cpus} x {cpu_model()}; temp dir on {temp_disk()}",
        f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, "
        f"SQLAlchemy {sqlalchemy.__version__}, psycopg {psycopg.__version__}",
        f"PostgreSQL: {postgres_version or 'not measured'}",
    ]


def postgres_version(url: str) -> str:
    """The server's ``server_version`` and ``synchronous_commit``."""
    import psycopg

    with psycopg.connect(url, connect_timeout=3) as conn:
        version = conn.execute("SHOW server_version").fetchone()
        sync = conn.execute("SHOW synchronous_commit").fetchone()
    return f"{version[0] if version else '?'} (synchronous_commit={sync[0] if sync else '?'})"
