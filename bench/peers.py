"""The peers we compare against, each in a virtual environment of its own, installed from PyPI.

Each peer gets its own venv under ``build/bench-peers/<name>-<hash of its requirements>`` so
their pins cannot fight each other or ours (localstripe pins its own aiohttp, django-hordak
brings Django, python-accounting its own SQLAlchemy). A venv is built once and reused by later
runs; changing a pin builds a new one. Peer code runs only in subprocesses with that venv's
interpreter: nothing of a peer is imported into the benchmark process.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import venv
from dataclasses import dataclass
from pathlib import Path

#: Where the peer venvs live (ignored by git, like the rest of ``build/``).
PEERS_DIR = Path(__file__).resolve().parent.parent / "build" / "bench-peers"


@dataclass(frozen=True, slots=True)
class Peer:
    """A peer package and the exact pins it is measured at."""

    name: str
    requirements: tuple[str, ...]

    @property
    def home(self) -> Path:
        """The venv directory for exactly these pins."""
        digest = hashlib.sha256("\n".join(self.requirements).encode()).hexdigest()[:10]
        return PEERS_DIR / f"{self.name}-{digest}"

    @property
    def python(self) -> Path:
        """The venv's interpreter."""
        return self.home / "bin" / "python"


#: localstripe, the stateful fake Stripe server (aiohttp).
LOCALSTRIPE = Peer("localstripe", ("localstripe==1.15.10",))
#: openapi-python-client, not a peer but a tool with the same need: it brings its own pins of
#: pydantic, httpx and ruff. tests/e2e/test_openapi_client.py generates a client of our OpenAPI
#: document with it and runs the README's walk-through through that client in this venv (the
#: generated code needs httpx, attrs and python-dateutil, which the tool depends on).
OPENAPI_CLIENT = Peer("openapi-python-client", ("openapi-python-client==0.29.1",))
#: django-hordak, a double-entry ledger on Django; PostgreSQL through psycopg2.
HORDAK = Peer("hordak", ("django-hordak==2.0.0", "psycopg2-binary==2.9.10"))
#: python-accounting, a double-entry ledger on SQLAlchemy. Installed without pip's dependency
#: resolution: it requires mysqlclient and psycopg2, which only build from source (MySQL and
#: libpq headers) and which its SQLite use never imports, so its other dependencies are pinned
#: here by hand.
ACCOUNTING = Peer(
    "accounting",
    (
        "--no-deps",
        "python-accounting==2.0.0",
        "sqlalchemy==2.1.9",
        "typing-extensions==4.16.0",
        "python-dateutil==2.9.0.post0",
        "six==1.17.0",
    ),
)


def ensure(peer: Peer) -> Path:
    """The peer's interpreter, building its venv first if this is the first run with its pins.

    Raises ``RuntimeError`` with pip's output when the install fails (no network, say).
    """
    marker = peer.home / ".installed"
    if marker.exists():
        return peer.python
    print(f"\n    installing {peer.name} into {peer.home} ...", end="", file=sys.stderr, flush=True)
    venv.EnvBuilder(with_pip=True, clear=True).create(peer.home)
    done = subprocess.run(
        [str(peer.python), "-m", "pip", "install", "--quiet", *peer.requirements],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"pip install {' '.join(peer.requirements)} failed:\n{done.stderr}")
    marker.write_text("\n".join(peer.requirements) + "\n")
    return peer.python


def problem(peer: Peer) -> str | None:
    """Why ``peer`` cannot be measured (its install failed), or ``None`` once it is installed."""
    try:
        ensure(peer)
    except (RuntimeError, OSError) as exc:
        return f"{peer.name}: {str(exc).splitlines()[0]}"
    return None
