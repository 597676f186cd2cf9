"""Hypothesis state machines that hold a backend to plain reference models."""
