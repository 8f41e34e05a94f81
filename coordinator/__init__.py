"""coordinator: the sans-IO group coordinator of Kafka's classic group protocol (being built)."""
