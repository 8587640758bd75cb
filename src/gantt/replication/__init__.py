"""A replica of the store in memory: it follows the change feed and commits claims."""
