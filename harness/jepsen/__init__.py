"""Jepsen-style testing for kraftlab: histories and the checkers that judge them.

The checkers (`linearizable`, `queue`) are pure functions over a history: they read operations
and return a verdict with examples, they never touch a cluster. The same checkers judge real-process
runs and simulated runs. History format: docs/jepsen.md and ../shared/API.md.
"""
