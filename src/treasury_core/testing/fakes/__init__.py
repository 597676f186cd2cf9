"""Fakes of the ports for tests: a clock moved by hand, card providers with capabilities off."""
