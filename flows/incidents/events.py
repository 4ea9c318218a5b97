"""Localization events: what Reflex tells an SRE, as a record, JSON and a schema point."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field

from reflex_localize.schemas.codec import Point

SEVERITY = {"info": 1, "warning": 2, "critical": 3}
NO_HARDWARE = "none"

# Recommended action per component and strongest signal (first match wins).
_ACTIONS = [
    (
        "gpu",
        "temperature_high",
        "check the node's cooling (fans, airflow, cold plate); drain if it persists",
    ),
    (
        "gpu",
        "throttle_thermal",
        "check the node's cooling (fans, airflow, cold plate); drain if it persists",
    ),
    ("gpu", "throttle_power", "check the node's power delivery (PSU, power brake); drain node"),
    ("gpu", "sm_clock_low", "fail-slow GPU: reset the GPU; drain the node if clocks stay low"),
    ("gpu", "nvlink", "reset the GPU; check NVLink/NVSwitch; drain node if errors continue"),
    ("gpu", "pcie", "reseat the GPU / check the PCIe riser; drain node"),
    ("gpu", "ecc", "drain node; reset GPU; RMA if ECC errors continue"),
    ("gpu", "remap", "drain node; reset GPU to apply row remaps; RMA if remapping fails"),
    ("gpu", "", "drain node; reset the GPU"),
    ("nic", "pause", "PFC storm: isolate the NIC port; check the NIC and switch buffers"),
    ("nic", "", "check cable/port: reseat or replace the transceiver; check the switch port"),
    ("host", "", "check host processes, memory and storage; drain node if it persists"),
    (
        "node",
        "sm_clock_low",
        "check the node's cooling (fans, inlet air) and power supplies; drain if clocks stay low",
    ),
    ("node", "", "drain node and run diagnostics"),
]


def recommend_action(component: str, top_signal: str) -> str:
    for want_component, fragment, action in _ACTIONS:
        if component == want_component and fragment in top_signal:
            return action
    return "investigate the node"


@dataclass
class Evidence:
    signal: str
    temporal_z: float | None  # deviation from the entity's own baseline, in spreads
    peer_z: float | None  # deviation from its peers this window, in spreads
    weight: float
    since_ns: int


@dataclass
class Suspect:
    node: str
    component: str
    index: str
    score: float
    evidence: list[Evidence] = field(default_factory=list)
    role: str = ""  # "root" for the first-in-time explicit error, else ""

    @property
    def entity(self) -> str:
        return f"{self.node}|{self.component}|{self.index}"


@dataclass
class LocalizationEvent:
    event_id: str
    time_ns: int
    cluster: str
    job: str
    trigger: str  # explicit | regression | hang
    severity: str
    confidence: float
    suspects: list[Suspect]
    action: str
    summary: str
    cascade: dict = field(default_factory=dict)
    sites: dict = field(default_factory=dict)  # suspect node -> its site tags (rack, switch)

    @property
    def top(self) -> Suspect | None:
        return self.suspects[0] if self.suspects else None

    @property
    def no_hardware_fault(self) -> bool:
        return self.top is None

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> LocalizationEvent:
        raw = json.loads(text)
        raw["suspects"] = [
            Suspect(**{**s, "evidence": [Evidence(**e) for e in s["evidence"]]})
            for s in raw["suspects"]
        ]
        return cls(**raw)

    def to_point(self) -> Point:
        top = self.top
        return Point(
            "reflex_event",
            {"cluster": self.cluster, "job": self.job, "trigger": self.trigger},
            {
                "event_id": self.event_id,
                "severity": SEVERITY[self.severity],
                "confidence": float(self.confidence),
                "suspect_node": top.node if top else "",
                "suspect_component": top.component if top else NO_HARDWARE,
                "suspect_index": top.index if top else "",
                "action": self.action,
                "summary": self.summary,
                "suspects": json.dumps([asdict(s) for s in self.suspects[:5]], sort_keys=True),
                "sites": json.dumps(self.sites, sort_keys=True),
            },
            self.time_ns,
        )


def event_id(job: str, trigger: str, first_window: int, node: str) -> str:
    """Same incident, same id: a replay after recovery overwrites instead of duplicating."""
    return hashlib.sha1(f"{job}|{trigger}|{first_window}|{node}".encode()).hexdigest()[:16]
