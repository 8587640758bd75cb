"""Gantt's HTTP service. ``app`` builds the ASGI app from ``routes`` (the route table, over ``handlers``), ``hot``
(the load-carrying routes past Starlette) and ``guard`` (token, catch-up, counts), over the ``runtime`` (the
``Service``: the replica, handler threads, deciders); ``server`` binds and runs workers on ``protocol``;
``schemas`` holds the wire types, shared with the client, and ``openapi`` the document describing them.

Nothing is imported here, so that ``gantt.client`` can use the wire types without loading Starlette or uvicorn.
"""
