"""Which job an explicit event belongs to, when membership is incomplete or contradicts itself.

* An event that names its job (a training event) goes to that job.
* A GPU's event goes to the job that claimed that GPU most recently: two jobs claiming one GPU
  (a job that ended without saying so, a rescheduled rank) must not give two events for one
  XID. The double claim is reported as a contradiction, once.
* A node-level event (an MCE, a link down) goes to every job running on the node.
* An event from a node in no known job is returned as an orphan: the shard turns a critical
  one into an event of its own (job unknown) and counts the rest; none is dropped silently.

>>> from reflex_localize.flows.messages import ExplicitEvent
>>> xid = ExplicitEvent(1, "n1", "xid", 79, "gpu", "3", "critical", "off the bus", "drain")
>>> claims = {("n1", 3): {"old": 5, "new": 9}}
>>> routed, orphans = route_events([xid], {"n1": {"old", "new"}}, claims)
>>> list(routed), orphans
(['new'], [])
"""

from __future__ import annotations

from reflex_localize.flows.messages import ExplicitEvent

Claims = dict[tuple[str, int], dict[str, int]]  # (node, gpu) -> job -> when it claimed it


def route_events(
    events: list[ExplicitEvent], jobs_on_node: dict[str, set[str]], claims: Claims
) -> tuple[dict[str, list[ExplicitEvent]], list[ExplicitEvent]]:
    """``(events per job, orphans)``; see the module docstring. ``jobs_on_node``: the jobs
    each node runs, as membership says."""
    routed: dict[str, list[ExplicitEvent]] = {}
    orphans: list[ExplicitEvent] = []
    known = set().union(*jobs_on_node.values()) if jobs_on_node else set()
    for event in events:
        jobs = _jobs_of(event, jobs_on_node, known, claims)
        for job in jobs:
            routed.setdefault(job, []).append(event)
        if not jobs:
            orphans.append(event)
    return routed, orphans


def _jobs_of(
    event: ExplicitEvent, jobs_on_node: dict[str, set[str]], known: set[str], claims: Claims
) -> list[str]:
    running = jobs_on_node.get(event.node, set())
    if event.job:  # a training event names its job
        return [event.job] if event.job in known else []
    if event.component == "gpu" and event.index.isdigit():
        claimants = claims.get((event.node, int(event.index)), {})
        live = {job: at for job, at in claimants.items() if job in running}
        if live:
            return [max(sorted(live), key=lambda job: live[job])]
    return sorted(running)


def double_claims(claims: Claims, running: set[str]) -> list[str]:
    """Each GPU that two running jobs claim, described once per GPU."""
    return [
        f"{node} gpu {gpu} is claimed by jobs {', '.join(sorted(jobs))}"
        for (node, gpu), jobs in sorted(claims.items())
        if len(set(jobs) & running) > 1
    ]
