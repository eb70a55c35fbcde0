"""Who may connect and what they may do: TLS, SASL, Kafka's ACL model, connection and request limits.

Every piece here is sans-IO: the server hands in bytes, names and clocks, and gets decisions back.
"""
