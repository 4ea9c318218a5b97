"""Least-privilege InfluxDB tokens for Reflex's two writers and readers.

- ``agent``: write to the telemetry bucket, nothing else (it can neither read telemetry nor
  touch the results bucket);
- ``flow``: read the telemetry bucket and write the results bucket, nothing else;
- ``grafana``: read the telemetry and results buckets, nothing else (dashboards only read).

They are created through InfluxDB's ``/api/v2/authorizations`` API with an operator's token
(one allowed to create authorizations in the org: the setup token, or an all-access token).
The new token is returned once; InfluxDB 2.9 stores only its hash.

>>> sorted(ROLES), ROLES["agent"]
(['agent', 'flow', 'grafana'], (('write', 'telemetry'),))
>>> operator = InfluxSettings(url="http://127.0.0.1:8086", token=admin_token)  # doctest: +SKIP
>>> create_token(operator, "agent")  # doctest: +SKIP
'...the new token...'
"""

from __future__ import annotations

from influxdb_client import InfluxDBClient, Permission, PermissionResource
from influxdb_client.rest import ApiException

from reflex_localize.influx.config import InfluxSettings
from reflex_localize.influx.connection import connect

# role -> (action, which bucket) pairs: "telemetry" and "results" name the configured buckets.
ROLES: dict[str, tuple[tuple[str, str], ...]] = {
    "agent": (("write", "telemetry"),),
    "flow": (("read", "telemetry"), ("write", "results")),
    "grafana": (("read", "telemetry"), ("read", "results")),
}


class TokenError(RuntimeError):
    """InfluxDB refused to create the token, or the org or a bucket does not exist."""


def create_token(
    operator: InfluxSettings,
    role: str,
    *,
    telemetry_bucket: str = "telemetry",
    results_bucket: str = "reflex",
    description: str | None = None,
) -> str:
    """Creates a token with exactly the permissions of ``role``; returns it."""
    if role not in ROLES:
        raise TokenError(f"unknown role {role!r} (known: {', '.join(sorted(ROLES))})")
    buckets = {"telemetry": telemetry_bucket, "results": results_bucket}
    client = connect(operator)
    org = operator.org
    try:
        org_id = _org_id(client, org)
        permissions = [
            Permission(
                action=action,
                resource=PermissionResource(
                    type="buckets", id=_bucket_id(client, buckets[which], org_id), org_id=org_id
                ),
            )
            for action, which in ROLES[role]
        ]
        text = description or role_description(role, telemetry_bucket, results_bucket)
        authorization = client.authorizations_api().create_authorization(
            org_id=org_id, permissions=permissions
        )
        _describe(client, authorization, text)
    except ApiException as error:
        # The client's message is the server's JSON answer; it never echoes the request's token.
        raise TokenError(
            f"InfluxDB at {operator.url}: HTTP {error.status} {error.reason}"
        ) from None
    finally:
        client.close()
    token = authorization.token
    if not token:
        raise TokenError(
            f"InfluxDB at {operator.url} created the authorization but returned no token"
        )
    return str(token)


def role_description(
    role: str, telemetry_bucket: str, results_bucket: str, prefix: str = "reflex "
) -> str:
    """How a token of ``role`` is described in InfluxDB: ``reflex agent: write telemetry``."""
    buckets = {"telemetry": telemetry_bucket, "results": results_bucket}
    grants = ", ".join(f"{action} {buckets[which]}" for action, which in ROLES[role])
    return f"{prefix}{role}: {grants}"


def _org_id(client: InfluxDBClient, org: str) -> str:
    found = client.organizations_api().find_organizations(org=org)
    if not found:
        raise TokenError(f"no organization {org!r}")
    return str(found[0].id)


def _bucket_id(client: InfluxDBClient, name: str, org_id: str) -> str:
    try:
        found = client.buckets_api().find_buckets(name=name, org_id=org_id).buckets
    except ApiException as error:
        if error.status != 404:
            raise
        found = []
    if not found:
        # A fresh org has no Reflex buckets until `reflex setup` (or `influx apply`) makes them.
        raise TokenError(f"no bucket {name!r} in the organization (reflex setup creates it)")
    return str(found[0].id)


def _describe(client: InfluxDBClient, authorization: object, text: str) -> None:
    """Names the token in InfluxDB's UI, so an operator can tell what to revoke."""
    authorization.description = text  # type: ignore[attr-defined]
    client.authorizations_api().update_authorization(authorization)


def delete_tokens(
    operator: InfluxSettings, description_prefix: str, *, dry_run: bool = False
) -> list[str]:
    """Deletes the org's tokens whose description starts with ``description_prefix``.

    Returns their descriptions (``dry_run``: deletes nothing). Tokens are told apart only by
    their description, so callers pass a prefix that only they write (``reflex setup ``).
    """
    client = connect(operator)
    try:
        org_id = _org_id(client, operator.org)
        api = client.authorizations_api()
        doomed = [
            found
            for found in api.find_authorizations(org_id=org_id)
            if (found.description or "").startswith(description_prefix)
        ]
        for authorization in [] if dry_run else doomed:
            api.delete_authorization(authorization)
    except ApiException as error:
        raise TokenError(
            f"InfluxDB at {operator.url}: HTTP {error.status} {error.reason}"
        ) from None
    finally:
        client.close()
    return [str(found.description) for found in doomed]
