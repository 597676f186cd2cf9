"""The JSON API's handlers, one module per part of the interface."""
