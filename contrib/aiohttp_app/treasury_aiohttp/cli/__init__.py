"""The ``treasury`` command and its groups."""
