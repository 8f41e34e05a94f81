"""The HTTP admin API of every node: the aiohttp server (server.py) and its routes (topics.py,
records.py), the HTTP edge they share (http.py: errors, bad input, JSON values), a follower's
forwarding to the active controller (forward.py), bearer-token auth (auth.py), the OpenAPI
document (openapi.py); and the client side: the blocking client the CLI, benchmarks and Jepsen
runs use (client.py) and the kafka-metadata-quorum text of the quorum views (describe_quorum.py).
The server sees the node as an `AdminNode` (context.py), a protocol over the runtime's node
context, never the node class; nothing here imports the CLI."""
