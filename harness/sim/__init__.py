"""harness.sim: the deterministic simulator (DESIGN.md, "two drivers"). The real Raft core, log
store and metadata image run on a virtual clock with a seeded network, simulated disks that lose
unsynced writes on crash, and a nemesis; invariants are checked after every event and one seed
reproduces one run exactly. Entry points: `Simulation`/`run_seed` (harness.sim.runs.simulation) and
`kraftlab sim quorum` (harness.cli.sim)."""
