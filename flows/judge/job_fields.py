"""What a job step keeps between windows, and its configuration: plain, picklable state.

The logic that advances it is in the classes built on :class:`JobFields`, one job each:
ranking suspects (``job_suspects``), telling incidents (``job_telling``), findings that name
a part (``job_findings``), triggers (``job_triggers``) and the per-window step (``job_step``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np

from reflex_localize.flows.impact.model import ImpactModel
from reflex_localize.flows.impact.model_file import ImpactModelFile
from reflex_localize.flows.incidents.events import Suspect
from reflex_localize.flows.judge.alarm_budget import DEFAULT_BUDGET, AlarmBudget
from reflex_localize.flows.judge.detectors import CompoundScore
from reflex_localize.flows.judge.job_evidence import EvidenceBook, rank_entity
from reflex_localize.flows.judge.liveness import LivenessTracker
from reflex_localize.flows.judge.node_drift import NodeDrift
from reflex_localize.flows.judge.step_peers import StepFinding, StepPeers
from reflex_localize.flows.judge.triggers import HangDetector, StepRegression
from reflex_localize.flows.messages import ExplicitEvent, JobWindow, RankInfo
from reflex_localize.flows.signals.derive import SIGNAL_NAMES, STEP_SIGNAL
from reflex_localize.flows.state_upgrade import FieldsFilledOnRestore
from reflex_localize.schemas.hardware_profiles import load_profiles

NO_STAGE = -(2**62)  # a step row of a rank the job's membership does not know

RECENT_WINDOWS = 3  # evidence this recent makes an entity a current suspect

# See INFO_HOLD_WINDOWS; a part's evidence that slows communication must hold this many
# windows too (_comm_straggler).
HOLD_WINDOWS = 3

# A job slowed with no suspect yet waits HOLD_WINDOWS for its cause's evidence (a straggler
# needs a few of its steps to stand out), then says "no hardware fault" only if the job stays
# slow until INFO_HOLD_WINDOWS: a job-wide wobble of a minute (fabric, storage, the data
# loader) is nothing an SRE can act on, a slowdown that holds two minutes is.
INFO_HOLD_WINDOWS = 12

# A regression names a part only when its evidence has held this many windows before (it was
# seen in PERSIST_WINDOWS + 1 windows in a row).
PERSIST_WINDOWS = 2

# A "no hardware fault" is revised by a suspect that stands out this soon after it; later,
# a suspect is a new incident that needs its own symptom.
REVISE_WINDOWS = 12

# A slowdown with no suspect is told ("no hardware fault") only from this size up.
INFO_MIN_SLOWDOWN = 0.05

# A part an event named that then showed no evidence this long has recovered: if it slows the
# job again within the cooldown, that is a new episode of an intermittent fault (a fail-slow
# that comes and goes), told again as a recurrence, not folded into the first incident.
RECUR_QUIET_S = 120.0

# Process exits and NCCL timeouts that begin this soon after a critical error or a crash told
# in the job are its cascade, and the job's lack of progress its consequence: PyTorch's NCCL
# watchdog waits 10 minutes by default (30 in older releases) before it kills the ranks stuck
# in a collective with the lost or dead rank.
CASCADE_AFTER_CRITICAL_S = 1800.0

# GPU signals that make a rank compute slower (a stage slow on all its ranks may be these).
SLOWING_SIGNALS = ("throttle_", "sm_clock_low", "power_low")

# Faults of a part that slow communication (see _comm_straggler), and the share of step time
# in collectives above which a job's communication is worth a straggler of its own.
COMM_FAULTS = (
    "nic_rate_low",
    "nic_link_recovery_rate",
    "nic_link_downed_rate",
    "nic_link_down",
    "nic_speed_low",
    "pcie_downgrade",
    "pcie_gen_low",
    "nvlink_down",
)

COMM_SHARE = 0.05

DEFAULT_PROFILE = "h100-sxm5-80gb"

CLOCK_COLUMN = SIGNAL_NAMES.index("sm_clock_low")  # its raw value: the window's mean MHz

# Against the rank's own history in this job, or its last; a one-node job's against its own.
DRIFTS = ("drift", "carried_drift", "node_drift")

# A throttle reason explains a low clock: such windows say nothing of a silent drift. (Holding
# at the power cap is how a loaded GPU runs, not a reason.)
THROTTLE_COLUMNS = [
    SIGNAL_NAMES.index(name)
    for name in ("throttle_thermal", "throttle_power", "throttle_hw_slowdown")
]

POWER_CAP_COLUMN = SIGNAL_NAMES.index("throttle_sw_power_cap")
POWER_COLUMN = SIGNAL_NAMES.index("power_low")  # its raw value: the window's mean watts


def default_weights() -> dict[str, dict[str, float]]:
    return {name: dict(p.weights) for name, p in load_profiles().items()}


MODES = ("reflex", "peer_only", "temporal_only", "threshold")


@dataclass
class JobConfig:
    """``mode`` selects Reflex or one of the baselines it is evaluated against:
    ``peer_only`` (Minder-style spatial similarity), ``temporal_only`` (own history only) and
    ``threshold`` (static per-metric rules, DCGM-health-check style)."""

    mode: str = "reflex"
    window_seconds: float = 10.0
    cluster: str = "sim"
    cooldown_s: float = 900.0
    hang_timeout_s: float = 60.0
    min_suspect_score: float = 3.0  # the prior bar for naming a part (see alarm_budget)
    # False events per 1,000 node-hours the triggers that blame hardware may raise: their bars
    # rise to the tail of their statistics on this fleet that this allows (alarm_budget).
    alarm_budget: float = DEFAULT_BUDGET
    score_export_min: float = 0.05
    # Live sources: a shard silent this many windows (dead, or its nodes gone) no longer holds
    # the job back. 0 waits for every shard: replays, whose partitions race each other.
    max_pending_windows: int = 0
    weights: dict[str, dict[str, float]] = field(default_factory=default_weights)
    # Receives (job, window end, entity -> signal -> unweighted evidence): `reflex fit` uses it.
    recorder: Callable[[str, int, dict[str, dict[str, float]]], None] | None = None
    # The learned impact model (flows/impact/model.py), and what `reflex fit-impact` learns
    # from: (job, window end, [(a rank's anomaly indicators, its slowdown)]). A live flow holds
    # the file, which a scheduled refit replaces (flows/impact/model_file.py).
    impact: ImpactModel | ImpactModelFile | None = None
    impact_recorder: Callable[[str, int, list[tuple[dict[str, float], float]]], None] | None = None


@dataclass
class JobFields(FieldsFilledOnRestore):
    """The job step's state; a snapshot pickles it whole."""

    job: str
    config: JobConfig
    pending: dict[int, dict[str, JobWindow]] = field(default_factory=dict)
    members: dict[int, RankInfo] = field(default_factory=dict)
    n_shards: int = 1
    world_size: int = 0
    world_size_told: bool = False
    compound: CompoundScore = field(default_factory=CompoundScore)
    # The share of each part's compound score that corrected errors, and the congestion a
    # port suffered, gave: no sign the part slows the job (see _slowing).
    corrected: CompoundScore = field(default_factory=CompoundScore)
    regression: StepRegression = field(default_factory=StepRegression)
    hang: HangDetector = field(default_factory=HangDetector)
    book: EvidenceBook = field(default_factory=EvidenceBook)
    recent_events: list[ExplicitEvent] = field(default_factory=list)
    cascade_waiting: int = -1  # window at which only cascade errors were seen
    last_event_ns: int = -(10**19)
    last_finding_ns: int = -(10**19)  # the job's step pattern was last told then
    # Nodes and entities the events of the open incidents named (within the cooldown).
    last_event_nodes: set[str] = field(default_factory=set)
    last_event_entities: set[str] = field(default_factory=set)
    # Critical errors told, by part (entity): when. A critical error is held back only as a
    # repeat of this finding within the cooldown, never by an event of another severity or part.
    critical_told: dict[str, int] = field(default_factory=dict)
    last_critical_ns: int = -(10**19)  # the job's last critical error told (for its cascade)
    crash_told_ns: int = -(10**19)  # a crash with no hardware error was told then
    # The open incidents' parts last had fresh evidence then, after a quiet gap this long (see
    # RECUR_QUIET_S); when each node an event named was told in this job.
    incident_active_ns: int = -(10**19)
    incident_gap_ns: int = 0
    episodes: dict[str, list[int]] = field(default_factory=dict)
    held_since: int = -1  # window of a regression still waiting for its cause's evidence
    # When the job's step time began to drift up, for the regression that reports it.
    slowdown_onset_ns: int = 2**62
    info_verdict_ns: int = -(10**19)  # a "no hardware fault" was told then; a suspect revises it
    step_now: float = 0.0  # the job's median step time in the latest window with steps
    last_evidence: dict[str, int] = field(default_factory=dict)  # entity -> last window
    fresh: set[str] = field(default_factory=set)  # entities with recent evidence
    stage_compute: dict[int, float] = field(default_factory=dict)
    stage_now: dict[int, float] = field(default_factory=dict)
    liveness: LivenessTracker = field(default_factory=LivenessTracker)
    # Each trigger statistic's tail on this fleet, and what a window gives of each: entities
    # by component ("score|gpu"), ranks' steps ("straggler"); the job's nodes.
    budget: AlarmBudget = field(default_factory=AlarmBudget)
    samples_per_window: dict[str, float] = field(default_factory=dict)
    node_count: int = 0
    # Node-seconds judged and events raised by trigger: the realized alarm rate (exported).
    node_seconds: float = 0.0
    raised: dict[str, int] = field(default_factory=dict)
    step_peers: StepPeers = field(default_factory=StepPeers)
    alerted: dict[str, int] = field(default_factory=dict)  # threshold mode: entity -> last alert
    # Records the job's parts came with, as of the job's first window (never this job's own).
    history: dict[str, tuple[float, str]] | None = None
    past_clocks_taken: bool = False  # the ranks' GPU clocks in their last jobs, taken
    # A one-node job against its own history (flows/judge/node_drift.py), and this window's
    # median clock and power of its GPUs, and whether most had a clock reason.
    node_drift: NodeDrift = field(default_factory=NodeDrift)
    node_gpus: tuple[float, float, bool] | None = None
    # A slow stage seen (the window, the finding), waiting for its node's cause before it is
    # told as partitioning (JobTriggers._waiting_stage).
    stage_waiting: tuple[int, StepFinding] | None = None
    sites: dict[str, dict[str, str]] = field(default_factory=dict)  # node -> site tags
    last_done: int = -1
    finished: bool = False

    def __post_init__(self) -> None:
        self.hang.timeout_s = self.config.hang_timeout_s


def clock_text(time_ns: int) -> str:
    return datetime.fromtimestamp(time_ns / 1e9, tz=UTC).strftime("%H:%M:%S")


def own_evidence(top: Suspect) -> bool:
    """A part told only by its peers (no history of its own yet) may be a quirk of that part:
    a late suspect (a revision, a hold's later windows) needs evidence from its own history,
    or its own slow steps."""
    return any(e.temporal_z is not None or e.signal == STEP_SIGNAL for e in top.evidence)


def checkpointing(parts: list[JobWindow]) -> bool:
    """Any rank marked a checkpoint in this window (the hook's checkpoint section)."""
    return any(bool(np.nan_to_num(p.steps.checkpoint).max(initial=0.0) > 0) for p in parts)


def rank_label(info: RankInfo) -> str:
    where = rank_entity(info).replace("|", " ")
    return f"{where}, GPU by rank order: the hook did not say" if info.gpu_inferred else where
