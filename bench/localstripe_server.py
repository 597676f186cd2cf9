"""Serve localstripe for the HTTP benchmark; run with the localstripe venv's interpreter.

``python bench/localstripe_server.py (--port N | --fd FD) --store FILE [--no-dump] [--quiet]``

This does what localstripe's own ``localstripe --from-scratch`` command does (its aiohttp app, its
middlewares, its access log to stderr at DEBUG) with two differences that change where, not how
much, it works:

- it listens on 127.0.0.1 only, not on every interface;
- its store file is ``FILE`` instead of the fixed ``/tmp/localstripe.pickle``, so runs on a shared
  machine do not overwrite each other's file. The work is unchanged: after every write (and after
  every POST, PUT or DELETE) localstripe pickles its whole in-memory store to that file, without
  ``fsync``; the file is a convenience for restarts, not durability.

``--no-dump`` skips that pickling, leaving localstripe's pure in-memory speed: the benchmark's
ceiling for what localstripe's request handling costs without the cost that grows with its store.

``--fd`` serves on a listening socket the caller already bound and passed down (the tests do
this): connections made before the server is up wait in the socket's backlog, so the caller
needs no readiness poll. ``--quiet`` drops the access log.

Nothing here imports the benchmark package: it runs in localstripe's own venv.
"""

from __future__ import annotations

import argparse
import logging
import pickle
import socket

from aiohttp import web
from localstripe import resources, server


def main() -> None:
    """Parse the options, point the store at its file (or nowhere), serve."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--port", type=int)
    where.add_argument("--fd", type=int, help="a listening socket inherited from the caller")
    parser.add_argument("--store", required=True, help="the file the store is pickled to")
    parser.add_argument("--no-dump", action="store_true", help="keep the store in memory only")
    parser.add_argument("--quiet", action="store_true", help="no access log")
    args = parser.parse_args()
    path: str = args.store

    def dump_to_disk(self: resources.Store) -> None:
        # localstripe's Store.dump_to_disk, with the path as an argument.
        with open(path, "wb") as f:
            pickle.dump(self, f, protocol=pickle.HIGHEST_PROTOCOL)

    def no_dump(self: resources.Store) -> None:
        return None

    resources.Store.dump_to_disk = no_dump if args.no_dump else dump_to_disk
    # As localstripe's start(): every request logged to stderr.
    logger = logging.getLogger("aiohttp.access")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(logging.StreamHandler())
    access_log = None if args.quiet else logger
    if args.fd is not None:
        sock = socket.socket(fileno=args.fd)
        web.run_app(server.app, sock=sock, access_log=access_log, print=None)
    else:
        web.run_app(server.app, host="127.0.0.1", port=args.port, access_log=access_log, print=None)


if __name__ == "__main__":
    main()
