"""The contract suites every storage adapter and card provider passes."""
