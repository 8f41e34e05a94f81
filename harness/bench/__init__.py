"""Benchmarks (`kraftlab bench KIND`, harness/cli/bench.py): one module per kind, each exposing
`add_arguments(parser)` and `run(args) -> int`; measured figures, never asserted in tests
(docs/benchmarks.md)."""
