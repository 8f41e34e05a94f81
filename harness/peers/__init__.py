"""Reference systems run beside kraftlab on the same machine, in the same run: Apache Kafka
itself (harness/peers/kafka), installed from Maven Central by the project's own files."""
