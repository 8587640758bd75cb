"""The compute scheduler: host state in columns, requests, filters, weighers, ranking, the engine."""
