"""The run-summary row shared by the simulator, Jepsen runs and the Spark analysis: its schema,
validation and Parquet writer."""
