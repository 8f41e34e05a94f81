"""kraftlab harness: runtimes (asyncio node, deterministic simulator), launcher, admin API, CLI,
Jepsen-style workloads and checkers, and the Spark comparison. It wires quorum/ and partition/."""
