"""The `kraftlab` command line, one module per verb group: each parses its arguments, calls one
package below (launcher, admin client, sim, jepsen, spark, study, bench) and prints. Nothing below
harness.cli imports it. Entry point: `harness.cli.main:main` (also `python -m harness`)."""
