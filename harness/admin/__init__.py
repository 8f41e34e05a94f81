"""The HTTP admin API of every node: the aiohttp server (server.py) and its routes (topics.py,
records.py), bearer-token auth (auth.py), the OpenAPI document (openapi.py), and the blocking
client the CLI, benchmarks and Jepsen runs use (client.py). The server depends on the runtime
through the node-context protocol, never on the CLI."""
