"""Evidence of one job's window: deviations from own history and peers, stragglers, errors.

What each entity contributed this window goes into ``totals`` (weighted, for the compound
score) and ``features`` (unweighted, for `reflex fit`); the latest evidence per signal, with
since when it has persisted, is kept for the events and the score points.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

import numpy as np

from reflex_localize.flows.incidents.events import Evidence
from reflex_localize.flows.judge.detectors import MIN_PEERS, evidence_strength, peer_deviation
from reflex_localize.flows.judge.nic_roles import nic_roles, port_kinds
from reflex_localize.flows.judge.node_evidence import NodeLevelEvidence
from reflex_localize.flows.judge.shard_step import DIRECTION, FLOORS
from reflex_localize.flows.judge.site_blame import SWITCH_TAG
from reflex_localize.flows.judge.site_wide import FABRIC_WIDE_NODES
from reflex_localize.flows.messages import ExplicitEvent, JobWindow, RankInfo
from reflex_localize.flows.signals.derive import SIGNAL_INDEX, SIGNAL_NAMES, STEP_SIGNAL, factorize
from reflex_localize.flows.state_upgrade import FieldsFilledOnRestore

# "reported": a hardware error only the training process reports (the hook): evidence that
# another sign must back, weighed as a warning.
EXPLICIT_EVIDENCE = {"critical": 6.0, "warning": 2.0, "reported": 2.0}
# A port's own faults: what makes it slow the traffic through it (not congestion, which a
# port suffers, and not error trickles, which many healthy ports show from day one).
PORT_FAULTS = (
    "nic_rate_low",
    "nic_link_recovery_rate",
    "nic_link_downed_rate",
    "nic_link_down",
    "nic_speed_low",
    "nic_symbol_error_rate",
    "nic_rcv_error_rate",
    "nic_integrity_error_rate",
)
BACK_PRESSURE = "nic_xmit_wait_rate"
Weights = Callable[[str], dict[str, float]]  # hardware profile -> signal -> weight
# Evidence whose episode ended longer ago than this is the part's past, not its present: an
# event lists it no more (a soak's event headlined a GPU's corrected-ECC rate, noted in a burst
# hours before, over the throttle that made it a suspect), nor does it count as a part's held
# fault (JobState._comm_straggler) or its own-history evidence (job_fields.own_evidence).
NOTE_KEEP_NS = 300 * 10**9


# States of a part that make its rank compute or get fed slower, and that a healthy part does
# not show: not error trickles (many healthy parts show them from day one), nor heat (it slows
# only through a throttle), nor a lower SM clock or power draw alone (healthy GPUs of one SKU
# differ by 8% on average, Sinha et al., SC22: a binned part is not a fault).
SLOWING_STATES = (
    "throttle_thermal",
    "throttle_power",
    "throttle_hw_slowdown",
    "power_limit_low",
    "memory_clock_low",
    "pcie_downgrade",
    "pcie_gen_low",
    "host_cpu_pressure",
    "host_memory_pressure",
    "host_io_pressure",
    "disk_busy",
    "host_memory_low",
)


def _columns(names: tuple[str, ...]) -> np.ndarray:
    return np.array([SIGNAL_INDEX[name] for name in names], dtype=np.int64)


_SLOWING_COLUMNS = _columns(SLOWING_STATES)
# Spreads off its peers at which a slowing state explains a rank's marginal slowness.
PEER_EXPLAINS = 6.0

# A link's retrains and downs come and go by nature: a link that flaps retrains every few tens
# of seconds, and a window between two retrains shows none. Such a signal back within this
# long of its last episode is the same episode (its persistence is the flapping's, not one
# retrain's).
FLAPPING = ("nic_link_recovery_rate", "nic_link_downed_rate")
FLAP_REJOIN_NS = 60 * 10**9

# Spreads taken off a departure from the part's own history that the peer comparison does
# not see (see combine_deviations).
OWN_ALONE_DISCOUNT = 3.0


def combine_deviations(own: np.ndarray, peers: np.ndarray, mode: str) -> np.ndarray:
    """Reflex counts in full a deviation from both the entity's own history and its peers: a
    job that heats every GPU is not one bad GPU, and a GPU that always runs hot is not a new
    fault. Either alone counts at a discount: its peers while its baseline warms up, its own
    history when its peers look the same as it does."""
    if mode == "peer_only":
        return peers
    if mode == "temporal_only":
        return own
    both = np.fmin(own, peers)
    # A part far from its own history counts on that alone, at a discount: a GPU that drifts
    # into the band its binned-low peers already occupy, or a whole node in a job too small
    # to have peers, leaves its history and not its peers. (A job-wide change is masked
    # before this counts: job_wide_phase.)
    alone = own - OWN_ALONE_DISCOUNT
    return np.where(np.isnan(own), peers - 1.0, np.fmax(both, alone))


# A one-node job's GPUs drawing more power than their own history together, or newly held at
# the power cap: the job works harder (a larger batch, a longer sequence), and the heat, the
# lower boost clock and the power cap that come with it are its workload's. A cooling or power
# fault gives the same load less clock at the same or lower power (flows/judge/node_drift.py).
WORKLOAD_SIGNALS = _columns(
    ("temperature_high", "memory_temperature_high", "sm_clock_low", "power_low",
     "throttle_sw_power_cap")
)  # fmt: skip
_POWER_LOW = SIGNAL_INDEX["power_low"]
_POWER_CAP = SIGNAL_INDEX["throttle_sw_power_cap"]
POWER_UP_Z = 2.0  # spreads above its own history at which a GPU draws more


def working_harder(entities: np.ndarray, deviation: np.ndarray) -> np.ndarray:
    """The cells of a one-node job's GPUs that its heavier workload explains (see
    WORKLOAD_SIGNALS): all its GPUs' heat, clock and power signals, when most of them draw
    more power than before or are newly held at the cap. ``deviation``: off own history, in
    the direction that is bad (power_low's is negative when power rose).

    >>> e = np.array(["n|gpu|0", "n|gpu|1", "n|host|-"], dtype=object)
    >>> d = np.zeros((3, len(SIGNAL_NAMES)))
    >>> d[:2, _POWER_LOW], d[:2, SIGNAL_INDEX["temperature_high"]] = -2.5, 6.0
    >>> m = working_harder(e, d)
    >>> bool(m[0, SIGNAL_INDEX["temperature_high"]]), bool(m[2].any())
    (True, False)
    """
    out = np.zeros(deviation.shape, dtype=bool)
    gpu = np.array(["|gpu|" in e for e in entities.tolist()])
    if gpu.sum() < 2:
        return out
    more = np.nan_to_num(deviation[gpu, _POWER_LOW], nan=0.0) <= -POWER_UP_Z
    capped = np.nan_to_num(deviation[gpu, _POWER_CAP], nan=0.0) >= 3.0
    if 2 * int((more | capped).sum()) > int(gpu.sum()):
        out[np.ix_(np.flatnonzero(gpu), WORKLOAD_SIGNALS)] = True
    return out


def job_wide_phase(
    entities: np.ndarray,
    deviation: np.ndarray,
    peer: np.ndarray,
    checkpointing: bool,
    sites: Mapping[str, Mapping[str, str]] | None = None,
    site_wide: Collection[str] = (),
) -> np.ndarray:
    """Which (entity, signal) cells are a phase of the whole job, not a part's fault: a signal
    that left its own history on at least half of the job's nodes (two or more) at once (a
    checkpoint writing from every host, an evaluation pass), and, while the training hook
    marks a checkpoint, every host signal. Peers already cancel such phases in large groups;
    a job of three nodes has too few peers, and its hosts' own history alone would blame them.
    A part that stands out from its peers during the phase is still judged.

    So is a signal off on a quarter of the nodes or more (three or more) that do not all hang
    under one switch: fabric-wide congestion, a shared filesystem slowing every host, a hot
    machine room. That is the fabric's or the site's, never one node's. Nodes under one switch
    stay judged, for the switch rule (site_blame) to name the switch. ``site_wide``: the
    signals the shard saw off on many nodes of several jobs at once (flows/judge/site_wide.py),
    the site's here too. A one-node job's GPUs that all draw more power are its workload's
    (working_harder).
    """
    nodes = np.array([e.split("|", 1)[0] for e in entities.tolist()], dtype=object)
    names, which = factorize(nodes)
    masked = np.zeros(deviation.shape, dtype=bool)
    if len(names) >= 2:
        off = np.nan_to_num(deviation, nan=0.0) >= 3.0
        # Per signal, how many distinct nodes are off their own history.
        per_node = np.zeros((len(names), deviation.shape[1]), dtype=bool)
        np.logical_or.at(per_node, which, off)
        count = per_node.sum(axis=0)
        shared = (count >= 2) & (count * 2 >= len(names))
        wide = (count >= FABRIC_WIDE_NODES) & (count * 4 >= len(names)) & ~shared
        for col in np.flatnonzero(wide):
            off_nodes = names[per_node[:, col]].tolist()
            switches = {(sites or {}).get(n, {}).get(SWITCH_TAG) for n in off_nodes}
            shared[col] = len(switches) > 1 or None in switches
        masked[:, shared] = True
    elif len(names) == 1:  # no other node to share a phase with: the GPUs' own power tells
        masked |= working_harder(entities, deviation)
    if site_wide:  # off on many nodes of several jobs at once (flows/judge/site_wide.py)
        masked[:, _columns(tuple(site_wide))] = True
    if checkpointing:
        host = np.array(["|host|" in e for e in entities.tolist()])
        masked[host, :] = True
    return masked & ~(np.nan_to_num(peer, nan=0.0) >= 3.0)


def rounded(value: float) -> float | None:
    return None if not np.isfinite(value) else round(float(value), 2)


def peer_groups(
    entities: np.ndarray,
    profiles: np.ndarray,
    members: dict[int, RankInfo],
    roles: Mapping[str, str] | None = None,
) -> np.ndarray:
    """Peers share a job, a component kind, a pipeline stage and a GPU model: the last stage
    is legitimately slower than the others, and an A100 is not a slow H100. Ports are peers of
    ports of their own role (``roles``, see nic_roles): a management port is no slow rail."""
    roles = roles or {}
    gpu_stage = {f"{i.node}|gpu|{i.gpu}": i.pp_rank for i in members.values()}
    by_node: dict[str, Counter] = {}
    for info in members.values():
        if info.node not in by_node:  # not setdefault: it would build a Counter every time
            by_node[info.node] = Counter()
        by_node[info.node][info.pp_rank] += 1
    node_stage = {node: counts.most_common(1)[0][0] for node, counts in by_node.items()}
    groups = np.array(
        [
            f"{_kind(e, roles)}|{gpu_stage.get(e, node_stage.get(e.split('|', 1)[0], -1))}|{p}"
            for e, p in zip(entities.tolist(), profiles.tolist(), strict=True)
        ],
        dtype=object,
    )
    return _spread_single_node_groups(entities, groups)


def _kind(entity: str, roles: Mapping[str, str]) -> str:
    component = entity.split("|")[1]
    return f"{component}:{roles[entity]}" if entity in roles else component


def _spread_single_node_groups(entities: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """A stage held by one node (one data-parallel rank per stage) has no peer outside that
    node: a node in power brake would only meet its own GPUs. Such groups are judged across
    the job's stages instead (same component and model), as the stage's level cannot be told
    from the node's own trouble anyway. So are groups too small to judge at all: a node has
    one host, and with two data-parallel ranks per stage a stage holds two hosts, which no
    peer comparison can tell apart (a host whose disk is failing from the job's first step
    then had neither peers nor a history to differ from)."""
    nodes = [e.split("|", 1)[0] for e in entities.tolist()]
    spread = groups.copy()
    if len(set(nodes)) < 2:  # one node in all: no group has a peer outside it to gain
        return spread
    # Each group's rows and nodes in one pass (sets, not an np.unique of strings per group).
    rows_of: dict[str, int] = {}
    nodes_of: dict[str, set[str]] = {}
    for group, node in zip(groups.tolist(), nodes, strict=True):
        rows_of[group] = rows_of.get(group, 0) + 1
        nodes_of.setdefault(group, set()).add(node)
    for group, count in rows_of.items():
        if count < MIN_PEERS or len(nodes_of[group]) == 1:
            component, _, profile = group.split("|")
            spread[groups == group] = f"{component}|any|{profile}"
    return spread


@dataclass
class EvidenceBook(NodeLevelEvidence, FieldsFilledOnRestore):
    since: dict[tuple[str, str], int] = field(default_factory=dict)
    # (entity, signal) -> (since, end of the window it was first gone in) of its last episode
    # that ended: a slowdown is often told after the burst that caused it is over.
    ended: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    evidence: dict[str, list[Evidence]] = field(default_factory=dict)
    features: dict[str, dict[str, float]] = field(default_factory=dict)  # this window
    # This window's entities, their deviation from peers, and which signals carry weight:
    # read by peer_only() only when a slow stage needs it, so off the per-window path.
    peer_view: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    amounts: dict[str, dict[str, float]] = field(default_factory=dict)  # this window
    # (entity, slowing state) -> (since, latest peer z) while it stands PEER_EXPLAINS spreads
    # off its peers, own history aside: a part slow from the job's first step has no history
    # to differ from, and this is what its peers say (read by JobState._explained_straggler).
    peer_since: dict[tuple[str, str], tuple[int, float]] = field(default_factory=dict)
    # Each port's highest rate seen (its capability) and this window's role of every port:
    # rail or other (flows/judge/nic_roles.py).
    nic_peaks: dict[str, float] = field(default_factory=dict)
    nic_role: dict[str, str] = field(default_factory=dict)
    # (node entity, "node_compound" or "impact") -> the parts that made it in the last window.
    node_parts: dict[tuple[str, str], frozenset[str]] = field(default_factory=dict)
    now_ns: int = 0  # the end of the latest window

    def notes(self, entity: str) -> list[Evidence]:
        """The entity's latest evidence, strongest first: what holds now, or ended (or, for
        an error, arrived) within NOTE_KEEP_NS."""
        current = [e for e in self.evidence.get(entity, []) if self._current(entity, e)]
        return sorted(current, key=lambda e: -e.weight)

    def _current(self, entity: str, note: Evidence) -> bool:
        key = (entity, _episode_kind(note.signal))
        if key in self.since:
            return True
        _, gone = self.ended.get(key, (note.since_ns, note.since_ns))
        return gone >= self.now_ns - NOTE_KEEP_NS

    def _note(self, entity: str, evidence: Evidence) -> None:
        kept = [e for e in self.evidence.get(entity, []) if e.signal != evidence.signal]
        self.evidence[entity] = [*kept, evidence]

    def signals(
        self,
        entities: np.ndarray,
        values: np.ndarray,
        temporal: np.ndarray,
        scales: np.ndarray,
        profiles: np.ndarray,
        members: dict[int, RankInfo],
        mode: str,
        weights: Weights,
        end_ns: int,
        totals: dict[str, float],
        checkpointing: bool = False,
        slowing: tuple[str, ...] = SLOWING_STATES,
        rails: Mapping[str, str] | None = None,
        sites: Mapping[str, Mapping[str, str]] | None = None,
        site_wide: Collection[str] = (),
    ) -> None:
        """This window's deviations of every entity from its own history and its peers,
        weighed into evidence and added to ``totals``. ``rails``: GPU entity -> its rail's
        port, where gpu_topology said; ``sites``: node -> its site tags (rack, switch)."""
        self.peer_view, self.amounts, self.now_ns = None, {}, end_ns
        if not len(entities):
            return
        self.nic_role = nic_roles(entities, _port_rates(values), rails or {}, self.nic_peaks)
        groups = peer_groups(entities, profiles, members, port_kinds(self.nic_role, self.nic_peaks))
        peer = peer_deviation(values, groups, FLOORS, pooled_scale=scales)
        combined = combine_deviations(DIRECTION * temporal, DIRECTION * peer, mode)
        phase = job_wide_phase(
            entities, DIRECTION * temporal, DIRECTION * peer, checkpointing, sites, site_wide
        )
        strength = evidence_strength(combined) * ~phase
        kinds, which = factorize(profiles)
        per_profile = np.array([[weights(p).get(s, 0.0) for s in SIGNAL_NAMES] for p in kinds])
        weight = per_profile[which] if len(kinds) else np.zeros_like(strength)
        amount = strength * weight
        self.peer_view = (entities, peer, weight > 0)
        self._peer_held(entities, DIRECTION * peer, weight > 0, phase, end_ns, slowing)
        for row in np.flatnonzero(strength.sum(axis=1) > 0):
            self.features[entities[row]] = {
                SIGNAL_NAMES[c]: float(strength[row, c]) for c in np.flatnonzero(strength[row])
            }
        for row in np.flatnonzero(amount.sum(axis=1) > 0):
            entity = entities[row]
            totals[entity] = totals.get(entity, 0.0) + float(amount[row].sum())
            self.amounts[entity] = {
                SIGNAL_NAMES[c]: float(amount[row, c]) for c in np.flatnonzero(amount[row])
            }
            for col in np.flatnonzero(amount[row] > 0):
                signal = SIGNAL_NAMES[col]
                since = self.since.get((entity, signal))
                if since is None:  # (a stamp of 0 is a stamp)
                    since = self._begun((entity, signal), end_ns)
                self._note(
                    entity,
                    Evidence(
                        signal,
                        rounded(temporal[row, col]),
                        rounded(peer[row, col]),
                        float(amount[row, col]),
                        since,
                    ),
                )
        # A signal that fell back to nothing ends its persistence. Only the keys that hold
        # one are looked at: the zeros of the matrix are nearly all of it.
        if self.since:
            row_of = {entity: row for row, entity in enumerate(entities.tolist())}
            for key in [k for k in self.since if k[0] in row_of and k[1] in SIGNAL_INDEX]:
                if amount[row_of[key[0]], SIGNAL_INDEX[key[1]]] == 0:
                    self._stop(key, end_ns)

    def _begun(self, key: tuple[str, str], end_ns: int) -> int:
        """A new episode of the key from this window, or a flapping link's retrains back
        within FLAP_REJOIN_NS: the episode before, continued."""
        began, gone = self.ended.get(key, (end_ns, -FLAP_REJOIN_NS))
        since = began if key[1] in FLAPPING and end_ns - gone <= FLAP_REJOIN_NS else end_ns
        self.since[key] = since
        return since

    def _peer_held(
        self,
        entities: np.ndarray,
        peer: np.ndarray,
        weighted: np.ndarray,
        phase: np.ndarray,
        end_ns: int,
        slowing: tuple[str, ...],
    ) -> None:
        cols = _SLOWING_COLUMNS if slowing is SLOWING_STATES else _columns(slowing)
        off = np.nan_to_num(peer[:, cols], nan=0.0)
        strong = (off >= PEER_EXPLAINS) & weighted[:, cols] & ~phase[:, cols]
        held = {}
        for row, col in zip(*np.nonzero(strong), strict=True):
            key = (str(entities[row]), slowing[col])
            since = self.peer_since.get(key, (end_ns, 0.0))[0]
            held[key] = (since, float(off[row, col]))
        self.peer_since = held

    def peer_only(self) -> dict[str, tuple[str, float, float]]:
        """This window: entity -> (signal, peer z, strength) of its strongest deviation from
        its peers alone, own history aside (a fault present since the entity's first window)."""
        if self.peer_view is None:
            return {}
        entities, peer, weighted = self.peer_view
        alone = evidence_strength(np.nan_to_num(DIRECTION * peer, nan=0.0)) * weighted
        found = {}
        for row in np.flatnonzero(alone.max(axis=1) > 0):
            col = int(np.argmax(alone[row]))
            found[entities[row]] = (
                SIGNAL_NAMES[col],
                float(peer[row, col]),
                float(alone[row, col]),
            )
        return found

    def stragglers(
        self,
        parts: list[JobWindow],
        members: dict[int, RankInfo],
        weights: Weights,
        end_ns: int,
        totals: dict[str, float],
    ) -> None:
        """Ranks whose compute time stands out from their stage's peers this window."""
        ranks = np.concatenate([p.steps.rank for p in parts])
        if not len(ranks):
            return
        compute = np.concatenate([p.steps.compute for p in parts])
        unique, inverse = np.unique(ranks, return_inverse=True)
        mean = np.bincount(inverse, weights=np.nan_to_num(compute)) / np.bincount(inverse)
        infos = [members.get(int(r)) for r in unique.tolist()]
        known = np.array([i is not None for i in infos])
        if known.sum() < 4:
            return
        infos_known = [i for i in infos if i is not None]
        groups = np.array([f"{i.pp_rank}|{i.profile}" for i in infos_known], dtype=object)
        values = mean[known][:, None]
        floor = np.array([max(0.02 * float(np.median(values)), 1e-3)])
        z = peer_deviation(values, groups, floor)[:, 0]
        strength = evidence_strength(z)
        slow = [
            (i, st, zz)
            for i, st, zz in zip(infos_known, strength.tolist(), z.tolist(), strict=True)
            if st > 0
        ]
        for info in infos_known:
            if not any(info is i for i, _, _ in slow):
                self._stop((rank_entity(info), STEP_SIGNAL), end_ns)
        for entity, placed, peer_z, profile in place_stragglers(slow, infos_known, totals):
            self.features.setdefault(entity, {})[STEP_SIGNAL] = placed
            amount = placed * weights(profile).get(STEP_SIGNAL, 1.0)
            totals[entity] = totals.get(entity, 0.0) + amount
            since = self.since.setdefault((entity, STEP_SIGNAL), end_ns)
            self._note(entity, Evidence(STEP_SIGNAL, None, peer_z, amount, since))

    def back_pressure(
        self, totals: dict[str, float], end_ns: int, congested: dict[str, float] | None = None
    ) -> None:
        """A port that waits for credits (``port_xmit_wait``) is the victim: the receiver it
        sends into drains slower. Its waiting is read from the receiving side: it goes to the
        port of the same rail on another node that shows a fault of its own, if one does. With
        no such port, it is congestion and stays where it is, also kept apart in ``congested``:
        a port the fabric holds back is no sign that the port slows the job. (A soak named a
        noisy port for a job regression on the credit waits it suffered in a congestion.)"""
        faulty = {
            e: sum(v for s, v in signals.items() if s in PORT_FAULTS)
            for e, signals in self.amounts.items()
            if "|nic|" in e
        }
        receivers: set[str] = set()
        for entity, signals in list(self.amounts.items()):
            wait = signals.get(BACK_PRESSURE, 0.0)
            if wait <= 0 or "|nic|" not in entity:
                continue
            node, _, port = entity.split("|")
            mates = [
                e for e, f in faulty.items()
                if f > 0 and e.endswith(f"|nic|{port}") and not e.startswith(f"{node}|")
            ]  # fmt: skip
            if not mates:
                if congested is not None:
                    congested[entity] = congested.get(entity, 0.0) + wait
                continue
            receiver = max(mates, key=lambda e: (faulty[e], e))
            receivers.add(receiver)
            totals[entity] -= wait
            totals[receiver] = totals.get(receiver, 0.0) + wait
            self.evidence[entity] = [
                e for e in self.evidence.get(entity, []) if e.signal != BACK_PRESSURE
            ]
            since = self.since.setdefault((receiver, "back_pressure"), end_ns)
            self._note(
                receiver, Evidence(f"back_pressure: {node} waits on it", None, None, wait, since)
            )
        self._ended("back_pressure", receivers, end_ns)

    def explicit(
        self, events: list[ExplicitEvent], totals: dict[str, float], corrected: dict[str, float]
    ) -> None:
        """Errors as evidence; what warnings (corrected errors: an MCE, a remap, a repeated
        application XID) add is also kept apart in ``corrected``: no sign that the part slows."""
        for event in events:
            amount = EXPLICIT_EVIDENCE.get(event.severity, 0.0)
            if amount and not event.is_cascade:
                totals[event.entity] = totals.get(event.entity, 0.0) + amount
                if event.severity in ("warning", "reported"):
                    corrected[event.entity] = corrected.get(event.entity, 0.0) + amount
                self._note(
                    event.entity,
                    Evidence(f"{event.kind}:{event.code}", None, None, amount, event.time_ns),
                )


_RATE_COLUMN = SIGNAL_INDEX["nic_rate_low"]  # an InfiniBand/RoCE port's rate, Gb/s
_SPEED_COLUMN = SIGNAL_INDEX["nic_speed_low"]  # a netdev's speed, Mb/s


def _port_rates(values: np.ndarray) -> np.ndarray:
    """Each row's link rate in Gb/s: a port's rate, else a netdev's speed; NaN for others."""
    rate = values[:, _RATE_COLUMN]
    return np.where(np.isnan(rate), values[:, _SPEED_COLUMN] / 1000.0, rate)


def _episode_kind(signal: str) -> str:
    """The persistence key of a note: its signal, or the kind of derived evidence it is
    ("back_pressure: node-0002 waits on it" is "back_pressure"). An error's note ("xid:79")
    has none, and ages from its arrival."""
    if signal in SIGNAL_INDEX or signal == STEP_SIGNAL:
        return signal
    if signal.startswith("record"):
        return "record"
    return signal.split(":", 1)[0]


def rank_entity(info: RankInfo) -> str:
    """The entity a rank's own slowness blames: its GPU, or its node when the training hook
    did not say which GPU the rank runs on."""
    return f"{info.node}|gpu|{info.gpu}" if info.gpu >= 0 else f"{info.node}|node|-"


def place_stragglers(
    slow: list[tuple[RankInfo, float, float]], ranks: list[RankInfo], totals: dict[str, float]
) -> list[tuple[str, float, float | None, str]]:
    """Which entity a straggling rank blames. One slow GPU among healthy ones on its node is
    the GPU's own doing. When most GPUs of a node straggle together, the cause is shared: the
    node's NIC or host, whichever already shows evidence (the host when neither does:
    dataloader, I/O and CPU stalls leave few other traces)."""
    per_node: dict[str, list[tuple[RankInfo, float, float]]] = {}
    for item in slow:
        per_node.setdefault(item[0].node, []).append(item)
    gpus_on_node = Counter(info.node for info in ranks)
    placed: list[tuple[str, float, float | None, str]] = []
    for node, items in sorted(per_node.items()):
        if len(items) < 0.75 * gpus_on_node[node] or len(items) < 2:
            placed += [(rank_entity(i), st, rounded(zz), i.profile) for i, st, zz in items]
            continue
        shared = [e for e in totals if e.startswith(f"{node}|") and "|gpu|" not in e]
        target = max(shared, key=lambda e: totals[e]) if shared else f"{node}|host|-"
        strongest = max(items, key=lambda item: item[1])
        placed.append((target, strongest[1], rounded(strongest[2]), strongest[0].profile))
    return placed
