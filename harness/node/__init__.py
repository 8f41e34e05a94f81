"""The node process: `python -m harness.node --config FILE` composes the runtime
(harness.runtime), the admin HTTP API (harness.admin) and the Kafka listener (harness.kafka)."""
