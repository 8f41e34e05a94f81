"""Bytes on the wire between processes: length-prefixed msgpack frames over asyncio streams
(transport.py), one pipelined connection with request ids (pipelined.py, client.py), and the
native data protocol messages brokers and clients exchange (data_protocol.py)."""
