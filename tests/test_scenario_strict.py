"""The scenario loader is strict: an unknown key, a value of the wrong type or an index out of
range is an error that names the file and the key (before, unknown keys were ignored, a node
index wrapped around the job's size, and type errors named no key)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reflex_localize.simulator.scenario import ScenarioError, load_scenario

GOOD = """
name = "t"
duration_s = 600
[cluster]
nodes = 4
[[job]]
name = "train"
nodes = 2
[[fault]]
type = "xid79"
job = "train"
job_node = 1
gpu = 3
onset_s = 300
"""


@pytest.mark.parametrize(
    ("edit", "names"),
    [
        (("duration_s = 600", "duration_s = 600\ndurashun_s = 5"), ["durashun_s"]),
        (("nodes = 4", "nodes = 4\nnodez = 9"), ["[cluster]", "nodez"]),
        (('name = "train"\nnodes = 2', 'name = "train"\nnodes = "two"'), ["[[job]] #1", "nodes"]),
        (("job_node = 1", "job_node = 2"), ["[[fault]] #1", "job_node", "0..1"]),
        (("gpu = 3", "gpu = 8"), ["[[fault]] #1", "gpu"]),
        (("onset_s = 300", "onset_s = 900"), ["onset_s"]),
        (("duration_s = 600", "duration_s = -5"), ["duration_s"]),
        (('job = "train"', 'job = "trian"'), ["job", "trian"]),
    ],
)
def test_a_mistake_names_the_file_and_the_key(
    edit: tuple[str, str], names: list[str], tmp_path: Path
) -> None:
    path = tmp_path / "mistake.toml"
    path.write_text(GOOD.replace(*edit, 1))
    with pytest.raises(ScenarioError) as raised:
        load_scenario(path)
    message = str(raised.value)
    assert str(path) in message and all(name in message for name in names), message


def test_the_good_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "good.toml"
    path.write_text(GOOD)
    assert load_scenario(path).faults[0].job_node == 1
