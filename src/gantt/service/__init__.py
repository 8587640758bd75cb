"""Gantt's HTTP service: ``gantt.service.app`` (the ASGI app), ``schemas`` (wire types, shared with the client),
``metrics`` (Prometheus text) and ``server`` (binding, workers).

Nothing is imported here, so that ``gantt.client`` can use the wire types without loading Starlette or uvicorn.
"""
