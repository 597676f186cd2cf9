"""The in-memory storage: the reference implementation of the storage port (``memory://``)."""
