"""A job that sees only some of its node's GPUs, numbered from 0 (a Slurm step bound to GPUs 4-7,
a Kubernetes pod given four of eight): the hook sends the lists that renumber them, and the flow
blames the node's GPU, not the process's device index."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import pytest
from foreign_inverse import foreign_replay, reflex_lines

from reflex_localize.collectors.training_hook import TrainingHook
from reflex_localize.flows.io.sources import LineProtocolSource
from reflex_localize.flows.judge.shard_step import ShardConfig, ShardState
from reflex_localize.flows.messages import WindowBatch
from reflex_localize.flows.runner import RunResult, run_in_process
from reflex_localize.flows.signals.visible_gpus import node_gpu
from reflex_localize.schemas.codec import decode, encode
from reflex_localize.schemas.frame import frames_from_points

UUIDS = {"GPU-aa01": 0, "GPU-bb02": 1, "GPU-cc03": 2, "GPU-dd04": 3}


@pytest.mark.parametrize(
    ("device", "cuda", "nvidia", "expected"),
    [
        (0, "", "", 0),  # nothing renumbers: the device index is the node's
        (2, "4,5,6,7", "", 6),
        (5, "3", "", 3),  # one device: the rank's local rank does not pick it
        (4, "4,5,6,7", "", None),  # past the list: CUDA has no such device
        (0, "GPU-cc03", "", 2),
        (0, "GPU-cc", "", 2),  # a unique prefix, as CUDA takes it
        (0, "GPU-", "", None),  # not unique
        (0, "MIG-4b7c", "", None),  # a MIG instance is no GPU of gpu_info
        (1, "", "3,1", 3),  # the container holds GPUs 1 and 3, in PCI order
        (1, "", "GPU-dd04,GPU-aa01", 3),
        (1, "", "GPU-dd04,GPU-ee05", None),  # not in gpu_info yet
        (0, "1", "2,3", 3),  # CUDA's list counts within the container's GPUs
        (0, "", "none", None),
        (1, "0,,2", "", 0),  # CUDA stops at the empty entry: one device, GPU 0
    ],
)
def test_the_node_gpu_is_found_through_the_visible_device_lists(
    device: int, cuda: str, nvidia: str, expected: int | None
) -> None:
    assert node_gpu(device, cuda, nvidia, UUIDS) == expected


def test_the_hook_sends_the_lists_it_started_with() -> None:
    sent: list[str] = []
    env = {"CUDA_VISIBLE_DEVICES": "4,5,6,7", "NVIDIA_VISIBLE_DEVICES": "all"}
    hook = TrainingHook(job="j", rank=1, world_size=2, local_rank=1, cluster="c", node="n",
                        sink=sent.append, env=env, flush_interval_s=0.05)  # fmt: skip
    hook.close()
    first = next(line for line in "".join(sent).splitlines() if line.startswith("job_m"))
    fields = decode(first).fields
    assert (fields["gpu"], fields["cuda_visible_devices"]) == (1, "4,5,6,7")
    assert fields["nvidia_visible_devices"] == "all"
    sent.clear()
    TrainingHook(job="j", rank=0, local_rank=0, cluster="c", node="n", sink=sent.append,
                 env={}, flush_interval_s=0.05).close()  # fmt: skip
    assert "visible_devices" not in "".join(sent)  # unset: nothing sent


def scenario_with_slow_gpu(tmp_path: Path, gpu: int) -> str:
    path = tmp_path / "slow_gpu.toml"
    text = (Path(__file__).parents[1] / "simulator/scenarios/fault_fail_slow_gpu.toml").read_text()
    path.write_text(text.replace("gpu = 3\n", f"gpu = {gpu}\n"))
    return str(path)


def renumbered(
    lines: list[str], how: str, uuids: dict[tuple[str, int], str] | None = None
) -> list[str]:
    """Each rank's membership as a process that sees only its half of the node's GPUs reports
    it: device index 0-3, with the list that says which half ("cuda": a Slurm step's indices;
    "nvidia": a pod's UUIDs, in any order; "none": no list, as a hook before the lists). The
    UUIDs are the agent's gpu_info's unless given."""
    uuids = dict(uuids or {})
    for line in lines:
        if line.startswith("gpu_info,"):
            point = decode(line)
            uuids[(point.tags["node"], int(point.tags["gpu"]))] = str(point.fields["uuid"])
    shuffle = random.Random(3).shuffle
    out = []
    for line in lines:
        if not line.startswith("job_membership,"):
            out.append(line)
            continue
        point = decode(line)
        fields = dict(point.fields)
        gpu, node = int(fields["gpu"]), point.tags["node"]
        half = range(4, 8) if gpu >= 4 else range(4)
        fields["gpu"] = gpu - half[0]
        if how == "cuda":
            fields["cuda_visible_devices"] = ",".join(map(str, half))
        elif how == "nvidia":
            held = [uuids[(node, g)] for g in half]
            shuffle(held)  # the device plugin's order, not PCI's
            fields["nvidia_visible_devices"] = ",".join(held)
        out.append(encode(replace(point, fields=fields)))
    return out


def replay(lines: list[str], path: Path) -> RunResult:
    path.write_text("\n".join(lines) + "\n")
    return run_in_process(LineProtocolSource(path, 1, 10.0))


@pytest.mark.slow
@pytest.mark.parametrize("how", ["cuda", "nvidia", "none"])
def test_a_slow_gpu_of_a_job_that_sees_half_the_node_is_named_by_its_node_index(
    tmp_path: Path, how: str
) -> None:
    lines = renumbered(reflex_lines(scenario_with_slow_gpu(tmp_path, 6), 420), how)
    assert any("visible_devices" in line for line in lines) == (how != "none")
    result = replay(lines, tmp_path / "renumbered.lp")
    named = [(e.top.node, e.top.component, e.top.index) for e in result.events if e.top]
    # Without a list the flow can only take the device index as it is: GPU 6 is blamed as 2.
    assert named[:1] == [("node-0006", "gpu", "6" if how != "none" else "2")]
    assert not result.error_counts


def test_a_rank_named_by_uuid_is_placed_once_its_node_sends_gpu_info() -> None:
    """Two pods of four GPUs on one node, both numbering theirs 0-3: until the agent's gpu_info
    says which UUID is which index the ranks' GPUs are unknown (not claimed twice); then each
    is placed on its own GPU, and a later window needs nothing more."""
    state = ShardState(ShardConfig())
    pods = {"a": "GPU-aa01,GPU-bb02,GPU-cc03,GPU-dd04", "b": "GPU-ee05,GPU-ff06,GPU-0007,GPU-0008"}
    joined = [
        decode(f'job_membership,cluster=c,job={job},node=n1,rank={rank} world_size=4i,gpu={rank}i,'
               f'active=true,nvidia_visible_devices="{held}" 1000')
        for job, held in pods.items() for rank in range(4)
    ]  # fmt: skip
    out = state.on_batch(WindowBatch("shard-0", 0, 0, 10**10, frames_from_points(joined)))
    assert {info.gpu for ranks in state.members.values() for info in ranks.values()} == {-1}
    assert not [item for route, item in out if route == "error"]
    uuids = [*pods["a"].split(","), *pods["b"].split(",")]
    info = [decode(f'gpu_info,cluster=c,gpu={index},node=n1,profile=h100-sxm5-80gb '
                   f'uuid="{uuid}" 2000') for index, uuid in enumerate(uuids)]  # fmt: skip
    state.on_batch(WindowBatch("shard-0", 1, 10**10, 2 * 10**10, frames_from_points(info)))
    placed = {job: sorted(i.gpu for i in ranks.values()) for job, ranks in state.members.items()}
    assert placed == {"a": [0, 1, 2, 3], "b": [4, 5, 6, 7]}
    assert not state.renumbered


@pytest.mark.slow
def test_without_the_agent_the_uuid_comes_from_dcgm_exporters_label(tmp_path: Path) -> None:
    """A Kubernetes cluster of dcgm-exporter and the hook, no agent (so no gpu_info): the pods'
    NVIDIA_VISIBLE_DEVICES name their GPUs by UUID, and dcgm-exporter labels each GPU's series
    with it, so the slow GPU is still named by its node index."""
    lines = foreign_replay(scenario_with_slow_gpu(tmp_path, 6), 420, "dcgm_v2")
    assert not any(line.startswith("gpu_info,") for line in lines)
    nodes = {f"node-{n:04d}" for n in range(1, 13)}
    labels = {(node, g): f"GPU-{node}-{g}" for node in nodes for g in range(8)}  # as written
    lines = renumbered(halves_swapped(lines), "nvidia", labels)
    result = replay(lines, tmp_path / "dcgm.lp")
    named = [(e.top.node, e.top.component, e.top.index) for e in result.events if e.top]
    assert named[:1] == [("node-0006", "gpu", "6")]


def halves_swapped(lines: list[str]) -> list[str]:
    """The hook's lines with each node's first four ranks and last four trading numbers, so the
    rank on GPU 6 is not the node's seventh rank: placing ranks by rank order, as the flow does
    for a GPU it cannot place, would blame GPU 2, so only the UUID can name GPU 6."""
    ranks: dict[str, list[int]] = {}
    for line in lines:
        if line.startswith("job_membership,"):
            point = decode(line)
            ranks.setdefault(point.tags["node"], []).append(int(point.tags["rank"]))
    swap: dict[int, int] = {}
    for held in ranks.values():
        held = sorted(set(held))
        half = len(held) // 2
        swap |= dict(zip(held, held[half:] + held[:half], strict=True))
    out = []
    for line in lines:
        if line.startswith(("train_step,", "job_membership,")):
            point = decode(line)
            tags = dict(point.tags)
            tags["rank"] = str(swap.get(int(tags["rank"]), int(tags["rank"])))
            line = encode(replace(point, tags=tags))
        elif line.startswith("event,") and "source=training" in line:
            point = decode(line)
            fields = dict(point.fields)
            fields["rank"] = swap.get(int(fields["rank"]), int(fields["rank"]))
            line = encode(replace(point, fields=fields))
        out.append(line)
    return out
