"""Invariants checked after every simulated event, and diagnoses of what a failing seed did."""
