"""The contract: measurements, fields, hardware profiles, the line-protocol codec.

Imports no other package of Reflex.
"""
