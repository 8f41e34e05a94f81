"""One simulated run, many seeds, and the scenario matrix: what a seed runs and what it reports."""
