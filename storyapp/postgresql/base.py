"""Django's PostgreSQL backend with one retry of a pool wait.

The pool's wait is short (LOREMASTER_DB_POOL_TIMEOUT, 3 s): a request that
found every connection busy for 10 s had long been given up by its reader.
One more wait covers a burst that ends in the meantime; after that the
request answers 503 (storyapp.views.busy), never a bare 500.
"""

import logging

from django.db.backends.postgresql import base
from psycopg_pool import PoolTimeout

log = logging.getLogger(__name__)


class DatabaseWrapper(base.DatabaseWrapper):
    def get_new_connection(self, conn_params):
        try:
            return super().get_new_connection(conn_params)
        except PoolTimeout:
            log.warning("Every pooled database connection was busy; waiting once more")
            return super().get_new_connection(conn_params)
