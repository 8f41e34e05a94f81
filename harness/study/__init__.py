"""The study: `kraftlab compare` runs the live check, real-process queue runs, the simulated
scenario matrix and the Spark analysis, and writes the report (docs/compare.md)."""
