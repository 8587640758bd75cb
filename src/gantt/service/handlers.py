"""The handlers of Gantt's own API (``/v1``, ``/health``, ``/metrics``, the version and OpenAPI documents): thin,
over the replica the ``Service`` holds; the domain objects and the store do the work.

Every handler decodes its input completely (msgspec, so a bad field is a 400 naming it) before it touches
anything, and every write is one store batch: a request is applied whole or not at all.
"""

from __future__ import annotations

import os
from functools import partial
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from gantt.base.version import __version__
from gantt.model import (
    Aggregate,
    CapacityQuestion,
    HostReport,
    HostStats,
    InvalidRequest,
    RequestSpec,
)
from gantt.replication.replica import Replica
from gantt.service.guard import authorized
from gantt.service.queries import host_key, page_limit, paginate, query_params
from gantt.service.responses import ENCODER, deleted, json_response
from gantt.service.runtime import Service, body_digest, decoded
from gantt.service.schemas import (
    MAX_LIMIT,
    AggregateList,
    AllocationList,
    AllocationView,
    Candidates,
    Health,
    InstancesIn,
    LastWriteError,
    ReportBatchIn,
    ReportIn,
    Selections,
    Written,
    timestamp,
    versions,
)

# A replica that has not read the change feed for this long answers /health with 503 "degraded".
STALE_AFTER = 10.0
# The overview's heat map shows at most this many nodes (the most used): enough to see a cloud's shape, small
# enough to poll every few seconds.
OVERVIEW_HOSTS = 2000


def _svc(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


async def health(request: Request) -> Response:
    svc = _svc(request)
    replica = svc.replica
    lag = replica.lag
    write_error = replica.last_write_error  # cleared by the store's next successful write
    status = "ok" if lag < STALE_AFTER and write_error is None else "degraded"
    named = svc.named_health() if svc.named_health is not None else None
    if named and any(one["status"] != "ok" for one in named.values()):
        status = "degraded"  # a namespace this service serves cannot be served now
    code = 200 if status == "ok" else 503
    if not authorized(request.scope, svc.token.encode() if svc.token else None):
        # A load balancer needs the status only; where the store is, which process answers and what the last
        # write error said are for operators.
        return json_response({"status": status}, code)
    counters = replica.counters()
    body = Health(status=status, version=__version__, pid=os.getpid(), store=replica.url,
                  revision=replica.revision, hosts=counters["hosts"], hosts_up=counters["hosts_up"],
                  seconds_since_sync=round(lag, 3),
                  last_write_error=LastWriteError.of(write_error) if write_error is not None else None,
                  namespaces=named)
    return json_response(body, code)


async def metrics(request: Request) -> Response:
    svc = _svc(request)
    # Off the event loop: summing capacity and usage per zone is a pass over every node (ms at 100,000).
    render = svc.shared.answer if svc.shared is not None else svc.metrics.render
    return Response(await svc.run(render, svc.replica), media_type="text/plain; version=0.0.4")


async def version_document(request: Request) -> Response:
    return json_response(versions())


async def openapi_document(request: Request) -> Response:
    return json_response(request.app.state.openapi)


async def report(request: Request) -> Response:
    svc = _svc(request)
    raw = await svc.raw_body(request)
    digest = body_digest(raw)
    if svc.report_again(digest):  # the body of a repeat taken before, and the record unchanged since
        return json_response(Written(revision=svc.replica.revision))
    body = decoded(raw, ReportIn)
    host_report = HostReport.of(list(body.name) if isinstance(body.name, tuple) else body.name, body.stats)
    host_report.reported_at = svc.replica.clock()
    repeated = svc.heartbeat(host_report, body=digest)
    svc.remember(digest, host_report, repeated)
    if repeated is not None:
        # The replica holds these figures already, at the revision it answers with; only the time is written later.
        return json_response(Written(revision=svc.replica.revision))
    batch = svc.replica.report_batch(host_report)
    batch.body = digest  # carried by its change: every worker knows the body then (liveness.Bodies)
    return json_response(Written(revision=await svc.write(batch)))


async def report_batch(request: Request) -> Response:
    svc = _svc(request)
    body = await svc.body(request, ReportBatchIn)
    reports = []
    for i, item in enumerate(body.reports):
        try:
            reports.append(HostReport.of(list(item.name) if isinstance(item.name, tuple) else item.name,
                                         item.stats))
        except InvalidRequest as exc:
            where = f"$.reports[{i}]" + (exc.field[1:] if exc.field and exc.field.startswith("$.stats") else ".name")
            raise InvalidRequest(f"{exc.message} (at {where})", field=where) from None
    if not reports:
        return json_response(Written(revision=svc.replica.revision, count=0))
    return json_response(Written(revision=await svc.run(svc.replica.report_many, reports), count=len(reports)))


def _host_view(host: dict[str, Any]) -> dict[str, Any]:
    host["updated_at"] = timestamp(host["updated_at"])
    return host


def _node_key(host: dict[str, Any]) -> str:
    return host_key(host["host"], host["nodename"])


def _list_hosts(replica: Replica, query: dict[str, str]) -> bytes:
    hosts = sorted(replica.hosts(), key=_node_key)
    page, links = paginate(hosts, _node_key, query, "/v1/hosts")
    return ENCODER.encode({"hosts": [_host_view(h) for h in page], "hosts_links": links})


async def list_hosts(request: Request) -> Response:
    svc = _svc(request)
    return Response(await svc.run(_list_hosts, svc.replica, query_params(request)), media_type="application/json")


async def show_host(request: Request) -> Response:
    svc = _svc(request)
    return json_response(_host_view(svc.replica.host(request.path_params["host"], query_params(request).get("node"))))


async def update_host(request: Request) -> Response:
    svc = _svc(request)
    node = query_params(request).get("node")
    stats = await svc.body(request, HostStats)
    return json_response(Written(revision=await svc.run(svc.replica.update_host, request.path_params["host"], node,
                                                 stats)))


async def delete_host(request: Request) -> Response:
    svc = _svc(request)
    query = query_params(request)
    force = query.get("force", "false")
    if force not in ("true", "false"):
        raise InvalidRequest(f"force must be true or false, not {force[:32]!r}", field="force")
    return deleted(await svc.run(partial(svc.replica.delete_host, force=force == "true"),
                                  request.path_params["host"], query.get("node")))


async def list_aggregates(request: Request) -> Response:
    return json_response(AggregateList(aggregates=_svc(request).replica.aggregates()))


async def show_aggregate(request: Request) -> Response:
    return json_response(_svc(request).replica.aggregate(request.path_params["id"]))


async def put_aggregate(request: Request) -> Response:
    svc = _svc(request)
    aggregate = await svc.body(request, Aggregate)
    if aggregate.key != request.path_params["id"]:
        raise InvalidRequest(f"id {aggregate.id!r} does not match the path's {request.path_params['id']!r}",
                             field="$.id")
    return json_response(Written(revision=await svc.run(svc.replica.update_aggregate, aggregate)))


async def delete_aggregate(request: Request) -> Response:
    svc = _svc(request)
    return deleted(await svc.run(svc.replica.delete_aggregate, request.path_params["id"]))


async def select_destinations(request: Request) -> Response:
    svc = _svc(request)
    spec = await svc.body(request, RequestSpec)
    with svc.metrics.deciding():
        replica = svc.replica
        # The replica runs it where it costs least: this loop, a decider's, or a handler thread (Replica.perform).
        # the id Guard gave the request, read from its scope: ``request.state`` builds a State object per call
        answer = await replica.perform(replica.selecting(spec, request.scope["state"]["request_id"]), svc,
                                       decision=True)
    return json_response(Selections(selections=answer))


def _candidates(replica: Replica, spec: RequestSpec, limit: int | None) -> Candidates:
    return Candidates(candidates=replica.candidates(spec, limit), explanation=replica.explain(spec))


async def candidates(request: Request) -> Response:
    svc = _svc(request)
    limit = page_limit(query_params(request), MAX_LIMIT)
    spec = await svc.body(request, RequestSpec)
    return json_response(await svc.run(_candidates, svc.replica, spec, limit))


async def capacity(request: Request) -> Response:
    svc = _svc(request)
    question = await svc.body(request, CapacityQuestion)
    return json_response(await svc.run(svc.replica.capacity, question))


async def overview(request: Request) -> Response:
    svc = _svc(request)
    return json_response(await svc.run(svc.replica.overview, OVERVIEW_HOSTS))


def _list_allocations(replica: Replica, query: dict[str, str]) -> AllocationList:
    allocations = sorted(replica.allocations(), key=lambda a: a.consumer_uuid)
    page, links = paginate(allocations, lambda a: a.consumer_uuid, query, "/v1/allocations")
    return AllocationList(allocations=[AllocationView.of(a) for a in page], allocations_links=links)


async def list_allocations(request: Request) -> Response:
    svc = _svc(request)
    return json_response(await svc.run(_list_allocations, svc.replica, query_params(request)))


async def show_allocation(request: Request) -> Response:
    return json_response(AllocationView.of(_svc(request).replica.allocation(request.path_params["consumer"])))


async def release(request: Request) -> Response:
    svc = _svc(request)
    revision = await svc.write(svc.replica.release_batch(request.path_params["consumer"]))
    # The answer is a revision this replica has applied that holds the release. Where the write's own catch-up
    # has brought the replica there (SQLite: the store hands a process its own revisions from memory), that is
    # it, without sync()'s read of the store's head per release; else sync() reads the feed up to every commit
    # before now, ours included.
    applied = svc.replica.revision
    return deleted(applied if applied >= revision else await svc.sync())


async def confirm_move(request: Request) -> Response:
    svc = _svc(request)
    return json_response(AllocationView.of(await svc.run(svc.replica.confirm_move, request.path_params["migration"])))


async def revert_move(request: Request) -> Response:
    svc = _svc(request)
    return json_response(AllocationView.of(await svc.run(svc.replica.revert_move, request.path_params["migration"])))


async def update_instances(request: Request) -> Response:
    svc = _svc(request)
    body = await svc.body(request, InstancesIn)
    fn = svc.replica.sync_instance_info if request.method == "PUT" else svc.replica.update_instance_info
    return json_response(Written(revision=await svc.run(fn, request.path_params["host"], body.instances)))


async def delete_instance(request: Request) -> Response:
    svc = _svc(request)
    return deleted(await svc.run(svc.replica.delete_instance_info, request.path_params["host"],
                                  request.path_params["instance"]))

