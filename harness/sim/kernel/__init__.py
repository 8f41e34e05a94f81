"""The simulator kernel: the event queue (the run's one clock, refusing events in the past) and
the seeded network model. It knows nothing of what runs on it."""
