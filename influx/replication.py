"""InfluxDB replication streams: the remote and the stream that push every write to a bucket
on to the flow's push source (``reflex flow --source influx-push``).

InfluxDB OSS 2.x forwards each write to ``local_bucket`` through a durable on-disk queue per
stream (``maxQueueSizeBytes``; past it, the oldest data is dropped) to any endpoint that speaks
the v2 write API, and retries until the endpoint answers 2xx. A stream is two objects: a
*remote* (where, with which token) and a *replication* (which bucket, how big a queue). Both
are found by name, so :func:`ensure_stream` is idempotent: run twice, it changes nothing; run
with another URL, token or queue size, it updates them in place (the queue is kept).

``settings`` is the operator's: a token allowed to read and write remotes and replications in
``settings.org`` (the setup token or an all-access one).

>>> settings = InfluxSettings(url="http://127.0.0.1:8086", token=admin_token)  # doctest: +SKIP
>>> ensure_stream(settings, name="reflex-flow", local_bucket="telemetry",
...     remote_url="http://flow-host:8087", remote_token=push_token,
...     remote_org="reflex")["replication_id"]  # doctest: +SKIP
'0a1b2c3d4e5f6a7b'
"""

from __future__ import annotations

import hashlib
import re
from typing import Any
from urllib.parse import quote

from reflex_localize.influx.config import InfluxSettings
from reflex_localize.influx.connection import connect
from reflex_localize.influx.json_api import JsonApi

DEFAULT_MAX_QUEUE_BYTES = 64 * 1024 * 1024  # InfluxDB's own default
MIN_MAX_QUEUE_BYTES = 33_554_430  # InfluxDB refuses a smaller queue (2.9.1: 32 MiB - 2 bytes)
_ID = re.compile(r"^[0-9a-f]{16}$")


class ReplicationError(RuntimeError):
    """InfluxDB refused a call on remotes or replications, or the org or bucket is missing."""


def remote_org_id(remote_org: str) -> str:
    """The ``remoteOrgID`` InfluxDB requires (a 16-hex-digit ID) for ``remote_org``.

    The flow's endpoint ignores the org, so an org *name* is turned into a stable ID of its
    own; an ID is kept as it is.

    >>> remote_org_id("0123456789abcdef"), remote_org_id("reflex") == remote_org_id("reflex")
    ('0123456789abcdef', True)
    """
    if _ID.match(remote_org):
        return remote_org
    digest = hashlib.sha256(remote_org.encode()).hexdigest()[:16]
    return digest if int(digest, 16) else "0000000000000001"  # 0 is not a valid ID


def ensure_stream(
    settings: InfluxSettings,
    *,
    name: str,
    local_bucket: str,
    remote_url: str,
    remote_token: str,
    remote_org: str,
    max_queue_bytes: int | None = None,
) -> dict[str, Any]:
    """Creates (or brings up to date) the remote and the replication called ``name``.

    Returns :func:`stream_status`'s dict plus ``created`` (True when either object is new) and
    ``updated`` (True when an existing one was changed).
    """
    queue = max_queue_bytes if max_queue_bytes is not None else DEFAULT_MAX_QUEUE_BYTES
    if queue < MIN_MAX_QUEUE_BYTES:
        raise ReplicationError(
            f"max_queue_bytes {queue} is below InfluxDB's minimum {MIN_MAX_QUEUE_BYTES}"
        )
    with connect(settings) as client:
        api = _Api(client, settings)
        org_id = api.org_id()
        bucket_id = api.bucket_id(local_bucket, org_id)
        wanted_remote = {
            "name": name,
            "remoteURL": remote_url,
            "remoteAPIToken": remote_token,
            "remoteOrgID": remote_org_id(remote_org),
            "allowInsecureTLS": False,
        }
        created = updated = False
        remote = api.find("remotes", org_id, name)
        if remote is None:
            remote = api.call("POST", "/api/v2/remotes", {**wanted_remote, "orgID": org_id})
            created = True
        else:
            # The token cannot be read back, so it is always sent: the call is idempotent.
            changed = remote.get("remoteURL") != remote_url or remote.get(
                "remoteOrgID"
            ) != remote_org_id(remote_org)
            remote = api.call("PATCH", f"/api/v2/remotes/{remote['id']}", wanted_remote)
            updated = changed
        wanted_stream = {
            "name": name,
            "remoteID": remote["id"],
            "localBucketID": bucket_id,
            "remoteBucketName": local_bucket,
            "maxQueueSizeBytes": queue,
        }
        stream = api.find("replications", org_id, name)
        if stream is None:
            api.call("POST", "/api/v2/replications", {**wanted_stream, "orgID": org_id})
            created = True
        elif stream.get("localBucketID") != bucket_id:
            # The bucket cannot be patched: a stream for another bucket is replaced.
            api.call("DELETE", f"/api/v2/replications/{stream['id']}")
            api.call("POST", "/api/v2/replications", {**wanted_stream, "orgID": org_id})
            updated = True
        else:
            patch = {
                key: value
                for key, value in wanted_stream.items()
                if key in ("remoteID", "remoteBucketName", "maxQueueSizeBytes")
                and _field(stream, key) != value
            }
            if patch:
                api.call("PATCH", f"/api/v2/replications/{stream['id']}", patch)
                updated = True
        status = _status(api, org_id, name)
    assert status is not None  # just created or found
    return {**status, "created": created, "updated": updated}


def stream_status(settings: InfluxSettings, name: str) -> dict[str, Any] | None:
    """The stream called ``name``: ids, remote URL, bucket, queue size and last answer; None
    when there is none.

    Keys: ``name``, ``replication_id``, ``remote_id``, ``remote_url``, ``local_bucket_id``,
    ``remote_bucket``, ``max_queue_bytes``, ``queue_bytes`` (now in the queue),
    ``remaining_bytes`` (not yet sent), ``latest_response_code`` (None before the first
    send), ``latest_error`` ("" when none).
    """
    with connect(settings) as client:
        api = _Api(client, settings)
        return _status(api, api.org_id(), name)


def remove_stream(settings: InfluxSettings, name: str) -> bool:
    """Deletes the replication and the remote called ``name``; False when neither existed."""
    with connect(settings) as client:
        api = _Api(client, settings)
        org_id = api.org_id()
        removed = False
        stream = api.find("replications", org_id, name)
        if stream is not None:
            api.call("DELETE", f"/api/v2/replications/{stream['id']}")
            removed = True
        remote = api.find("remotes", org_id, name)
        if remote is not None:
            api.call("DELETE", f"/api/v2/remotes/{remote['id']}")
            removed = True
        return removed


def _status(api: _Api, org_id: str, name: str) -> dict[str, Any] | None:
    stream = api.find("replications", org_id, name)
    if stream is None:
        return None
    remote = api.call("GET", f"/api/v2/remotes/{stream['remoteID']}")
    return {
        "name": name,
        "replication_id": stream["id"],
        "remote_id": stream["remoteID"],
        "remote_url": remote.get("remoteURL", ""),
        "local_bucket_id": stream.get("localBucketID", ""),
        "remote_bucket": _field(stream, "remoteBucketName") or "",
        "max_queue_bytes": stream.get("maxQueueSizeBytes"),
        "queue_bytes": stream.get("currentQueueSizeBytes", 0),
        "remaining_bytes": stream.get("remainingBytesToBeSynced", 0),
        "latest_response_code": stream.get("latestResponseCode"),
        "latest_error": stream.get("latestErrorMessage", ""),
    }


def _field(stream: dict[str, Any], key: str) -> Any:
    """A replication's field; 2.9.1 answers ``RemoteBucketName`` with a capital R."""
    return stream.get(key, stream.get(key[0].upper() + key[1:]))


class _Api(JsonApi):
    error_type = ReplicationError

    def bucket_id(self, bucket: str, org_id: str) -> str:
        try:
            found = self.call("GET", f"/api/v2/buckets?orgID={org_id}&name={quote(bucket)}")
        except ReplicationError as error:
            if "HTTP 404" not in str(error):
                raise
            found = {}
        buckets = found.get("buckets", [])
        if not buckets:
            raise ReplicationError(f"no bucket {bucket!r} in organization {self._settings.org!r}")
        return str(buckets[0]["id"])

    def find(self, kind: str, org_id: str, name: str) -> dict[str, Any] | None:
        """The remote or replication (``kind``) called ``name``, or None."""
        listed = self.call("GET", f"/api/v2/{kind}?orgID={org_id}&name={quote(name)}")
        key = "remotes" if kind == "remotes" else "replications"
        for item in listed.get(key) or []:
            if item.get("name") == name:
                return item
        return None
