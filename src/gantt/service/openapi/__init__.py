"""The OpenAPI 3.1 document the service serves at /openapi.json: ``document`` builds it from the wire types
(``gantt.service.schemas``) and the paths, ``prose`` adds ids, tags, examples and descriptions, ``namespaces``
the ``/v1/namespaces/{namespace}/...`` paths with the volume kind's bodies beside the compute kind's."""
