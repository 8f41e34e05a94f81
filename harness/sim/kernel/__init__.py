"""The simulator kernel: the virtual clock and event queue, and the seeded network model."""
