"""Django's PostgreSQL backend, waiting for a pooled connection twice (see base)."""
