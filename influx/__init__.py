"""The system of record: writer, spool, transport, configuration and the token rule,
connections, Flux literals, the reader to frames, the local server.

Imports only schemas.
"""
