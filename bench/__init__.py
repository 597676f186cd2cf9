"""treasury-core's benchmark suite: ``python -m bench`` from the repository root.

It measures the ledger kernel in memory, ledger movements committed through ``SqlStorage``
against the raw database driver doing the same statements, transfers through the treasury
service (same currency and FX) against the raw driver writing the same rows, and the cost of a
balance read as the postings table grows. See ``docs/performance.md`` for the method and the
latest figures.
"""
