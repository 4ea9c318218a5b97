"""Applies an InfluxDB template as a named stack, and removes the stack with all it made.

A stack is InfluxDB's record of what a template created (``/api/v2/stacks``); applying the
template again with the stack's id (``/api/v2/templates/apply``) updates those resources in
place, removes the ones the template no longer has, and creates nothing twice. Deleting the
stack deletes every resource it holds, and nothing else.

InfluxDB adopts into the stack a bucket, check, label, endpoint or variable that merely has the
same name as one in the template, and would then delete it with the stack. So before applying,
a dry run finds resources that exist outside the stack: a bucket (a site's own ``telemetry``,
with its data) is left out of the template and reported ``kept``; any other kind is refused
with its name. Tasks are never matched by name, so a task of the same name outside the stack
is refused too, rather than duplicated.

``settings`` carries the operator's token (one allowed to write every resource kind in the
org: the setup token or an all-access one).

>>> report = StackReport("0a1b2c3d4e5f6a7b", (Change("Bucket", "telemetry", "created"),))
>>> report.count("created"), report.as_dict()["changes"][0]["action"]
(1, 'created')
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import quote

from reflex_localize.influx.config import InfluxSettings
from reflex_localize.influx.connection import connect
from reflex_localize.influx.json_api import JsonApi

Json = dict[str, Any]
ACTIONS = ("created", "updated", "unchanged", "removed", "kept")
# The apply answer's diff sections, by the kind they hold (labelMappings follow the resources).
DIFF_KINDS = {
    "buckets": "Bucket",
    "checks": "Check",
    "dashboards": "Dashboard",
    "labels": "Label",
    "notificationEndpoints": "NotificationEndpoint",
    "notificationRules": "NotificationRule",
    "tasks": "Task",
    "telegrafConfigs": "Telegraf",
    "variables": "Variable",
}
# Fields of a diff entry that differ on every apply without anything having changed: stamps and
# ids the server fills in, and (2.9.1) a rule's old endpointName, which it reports as the rule's.
_VOLATILE = {"createdAt", "updatedAt", "ownerID", "taskID", "id", "orgID", "endpointName"}
_TRAILING_COMMA = re.compile(r",(?=\s*[)\]}])")
# Slow: the server compiles every task's and check's Flux while applying.
APPLY_TIMEOUT_S = 120.0


class StackError(RuntimeError):
    """InfluxDB refused the template or the stack, or a resource exists outside the stack."""


@dataclass(frozen=True)
class Change:
    """One resource and what applying or removing did to it (one of :data:`ACTIONS`)."""

    kind: str
    name: str
    action: str


@dataclass(frozen=True)
class StackReport:
    stack_id: str
    changes: tuple[Change, ...]
    dry_run: bool = False

    def count(self, action: str) -> int:
        return sum(change.action == action for change in self.changes)

    def as_dict(self) -> Json:
        return {
            "stack_id": self.stack_id,
            "dry_run": self.dry_run,
            "changes": [asdict(change) for change in self.changes],
        }


def apply_stack(
    settings: InfluxSettings,
    name: str,
    resources: Sequence[Json],
    *,
    dry_run: bool = False,
    description: str = "",
) -> StackReport:
    """Applies ``resources`` (template objects) as stack ``name``, creating the stack if new."""
    with connect(settings, timeout_s=max(settings.timeout_s, APPLY_TIMEOUT_S)) as client:
        api = _Api(client, settings)
        org_id = api.org_id()
        stack = find_stack(api, org_id, name)
        created_stack = False
        if stack is None and not dry_run:
            body = {"orgID": org_id, "name": name, "description": description}
            stack = api.call("POST", "/api/v2/stacks", body)
            created_stack = True
        try:
            return _apply(api, org_id, stack, list(resources), dry_run)
        except StackError:
            if created_stack and stack is not None:  # leave no empty stack behind
                api.call("DELETE", f"/api/v2/stacks/{stack['id']}?orgID={org_id}")
            raise


def remove_stack(settings: InfluxSettings, name: str, *, dry_run: bool = False) -> StackReport:
    """Deletes stack ``name`` and every resource it holds; no stack, nothing to do."""
    with connect(settings, timeout_s=max(settings.timeout_s, APPLY_TIMEOUT_S)) as client:
        api = _Api(client, settings)
        org_id = api.org_id()
        stack = find_stack(api, org_id, name)
        if stack is None:
            return StackReport("", (), dry_run)
        # The dry run of an empty template against the stack names what deleting it removes.
        preview = api.apply(org_id, [], stack_id=stack["id"], dry_run=True)
        changes = tuple(
            Change(kind, entry_name, "removed") for kind, entry_name, _ in _entries(preview)
        )
        if not dry_run:
            api.call("DELETE", f"/api/v2/stacks/{stack['id']}?orgID={org_id}")
        return StackReport(stack["id"], changes, dry_run)


def find_stack(api: _Api, org_id: str, name: str) -> Json | None:
    listed = api.call("GET", f"/api/v2/stacks?orgID={org_id}&name={quote(name)}")
    found = [stack for stack in listed.get("stacks") or [] if stack.get("name") == name]
    if len(found) > 1:
        raise StackError(f"{len(found)} stacks are named {name!r}; delete all but one")
    return found[0] if found else None


def _apply(
    api: _Api, org_id: str, stack: Json | None, resources: list[Json], dry_run: bool
) -> StackReport:
    stack_id = stack["id"] if stack else None
    owned = {resource["resourceID"] for resource in (stack or {}).get("resources") or []}
    _refuse_foreign_tasks(api, org_id, resources, owned)
    preview = api.apply(org_id, resources, stack_id=stack_id, dry_run=True)
    foreign = [
        (kind, entry_name, entry)
        for kind, entry_name, entry in _entries(preview)
        if entry.get("stateStatus") == "exists" and _hex_id(entry.get("id")) not in owned
    ]
    refused = [f"{kind} {entry_name!r}" for kind, entry_name, _ in foreign if kind != "Bucket"]
    if refused:
        raise StackError(
            "already in the organization but not in this stack, so removing the stack would "
            f"delete them: {', '.join(refused)}; rename or delete them first"
        )
    kept_meta = {entry["templateMetaName"] for _, _, entry in foreign}
    kept = [Change(kind, entry_name, "kept") for kind, entry_name, _ in foreign]
    resources = [r for r in resources if r["metadata"]["name"] not in kept_meta]
    answer = preview if dry_run else api.apply(org_id, resources, stack_id=stack_id)
    if kept_meta and dry_run:
        answer = api.apply(org_id, resources, stack_id=stack_id, dry_run=True)
    changes = [Change(kind, entry_name, _action(entry)) for kind, entry_name, entry in
               _entries(answer)]  # fmt: skip
    return StackReport(stack_id or "", tuple(kept + changes), dry_run)


def _refuse_foreign_tasks(api: _Api, org_id: str, resources: list[Json], owned: set[str]) -> None:
    names = [r["spec"]["name"] for r in resources if r["kind"] == "Task"]
    clashes = [
        name
        for name in names
        for task in api.call("GET", f"/api/v2/tasks?orgID={org_id}&name={quote(name)}").get(
            "tasks", []
        )
        if task.get("name") == name and task["id"] not in owned
    ]
    if clashes:
        raise StackError(
            f"tasks already in the organization but not in this stack: {', '.join(clashes)}; "
            "delete them first (applying would run each twice)"
        )


def _entries(answer: Json) -> list[tuple[str, str, Json]]:
    """(kind, resource name, diff entry) of every resource in an apply answer's diff."""
    out = []
    for section, kind in DIFF_KINDS.items():
        for entry in answer.get("diff", {}).get(section) or []:
            first = ("old", "new") if entry.get("stateStatus") == "remove" else ("new", "old")
            values = entry.get(first[0]) or entry.get(first[1]) or {}
            out.append((kind, values.get("name") or entry.get("templateMetaName", ""), entry))
    return out


def _action(entry: Json) -> str:
    status = entry.get("stateStatus")
    if status == "new":
        return "created"
    if status == "remove":
        return "removed"
    return "unchanged" if _same(entry.get("new") or {}, entry.get("old") or {}) else "updated"


def _same(new: Json, old: Json) -> bool:
    keys = (set(new) | set(old)) - _VOLATILE
    return all(_normal(key, new.get(key)) == _normal(key, old.get(key)) for key in keys)


def _normal(key: str, value: Any) -> Any:
    """A diff value as it means. A stored task query carries the ``option task`` line InfluxDB
    generated and, once updated, has been through Flux's formatter (line breaks, trailing
    commas); so queries are compared without those, and without whitespace. An absent offset
    reads ``0s`` once stored."""
    if key == "query" and isinstance(value, str):
        lines = [line for line in value.splitlines() if not line.startswith("option task = ")]
        return "".join(_TRAILING_COMMA.sub("", "\n".join(lines)).split())
    if key == "offset" and value in ("", "0s", None):
        return "0s"
    return value


def _hex_id(value: Any) -> str:
    """A diff's numeric id as the 16-hex-digit id the stack lists."""
    return f"{int(value):016x}" if isinstance(value, int) else str(value)


class _Api(JsonApi):
    error_type = StackError

    def apply(
        self, org_id: str, resources: list[Json], *, stack_id: str | None, dry_run: bool = False
    ) -> Json:
        body: Json = {"orgID": org_id, "dryRun": dry_run, "template": {"contents": resources}}
        if stack_id:
            body["stackID"] = stack_id
        return self.call("POST", "/api/v2/templates/apply", body)
