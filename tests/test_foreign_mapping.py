"""The foreign mapping tables load, cite their sources, and refuse every bad edit; the site tags
are declared, a site may add its own, and the flow keeps each node's per node."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from reflex_localize.flows.judge.shard_step import ShardConfig, ShardState
from reflex_localize.flows.messages import WindowBatch
from reflex_localize.schemas.contract import SchemaError, load_schema
from reflex_localize.schemas.foreign_mapping import _DIR, load_foreign_mapping, parse_field_row
from reflex_localize.schemas.foreign_translate import ForeignTranslator
from reflex_localize.schemas.frame import frames_from_points
from reflex_localize.schemas.site_tags import site_tags

SOURCES = {
    "telegraf_nvidia_smi.csv": "plugins/inputs/nvidia_smi",
    "telegraf_infiniband.csv": "plugins/inputs/infiniband/README.md",
    "telegraf_net.csv": "plugins/inputs/net/README.md",
    "telegraf_diskio.csv": "plugins/inputs/diskio/README.md",
    "dcgm_exporter.csv": "etc/default-counters.csv",
    "telegraf_pressure.csv": "plugins/inputs/psi/README.md",
    "node_exporter.csv": "collector/pressure_linux.go",
}


@pytest.mark.parametrize(("table", "source"), SOURCES.items())
def test_each_table_cites_the_documentation_it_follows(table: str, source: str) -> None:
    header = [row for row in (_DIR / table).read_text().splitlines() if row.startswith("#")]
    assert any(source in row for row in header)


def test_the_tables_feed_the_signals_reflex_judges_gpus_and_ports_by() -> None:
    targets = {
        name: {(r.reflex_measurement, r.reflex_field) for rows in table.rows.values()
               for r in rows.values() if r.convert != "ignore"}
        for name, table in load_foreign_mapping().tables.items()
    }  # fmt: skip
    for field in ("temperature_celsius", "sm_clock_mhz", "power_watts", "clocks_event_reasons"):
        assert ("gpu", field) in targets["telegraf_nvidia_smi"] & targets["dcgm_exporter"]
    assert ("event", "code") in targets["dcgm_exporter"]  # XID, which Telegraf does not have
    for field in ("symbol_error", "link_error_recovery", "port_rcv_errors", "port_xmit_wait"):
        assert ("ib_port", field) in targets["telegraf_infiniband"]


def row(**overrides: str) -> dict[str, str]:
    raw = {"foreign_measurement": "nvidia_smi", "foreign_field": "x", "reflex_measurement": "gpu",
           "reflex_field": "power_watts", "convert": "scale:1"}  # fmt: skip
    return raw | overrides


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"convert": "celsius"}, "unknown converter"),
        ({"reflex_field": "watts"}, "undeclared field gpu.watts"),
        ({"convert": "advanced_bit:0x40"}, "needs a bitmask field"),
        ({"convert": "yes_no"}, "needs a bool field"),
        ({"convert": "scale:ten"}, "bad argument"),
        ({"convert": "ignore"}, "maps to nothing"),
        ({"reflex_field": "temperature_celsius", "convert": "xid_event"}, "writes event.code"),
    ],
)
def test_a_bad_row_is_refused_naming_it(overrides: dict[str, str], message: str) -> None:
    with pytest.raises(SchemaError, match=message) as refused:
        parse_field_row(row(**overrides), "t.csv", load_schema())
    assert "t.csv: nvidia_smi.x" in str(refused.value)


@pytest.mark.parametrize(
    ("table", "append", "message"),
    [
        ("telegraf_infiniband.csv", "infiniband,symbol_error,,,ignore\n", "twice"),
        ("dcgm_exporter.csv", "nvidia_smi,other,,,ignore\n", "also in"),
        ("tags.csv", "nowhere,gpu,node,host,,\n", "unknown mapping"),
        (
            "telegraf_pressure.csv",
            'pressure,"avg10{type=some,resource=cpu}",,,ignore\n',
            "write its tags sorted",
        ),
        (
            "telegraf_pressure.csv",
            'pressure,"avg60{resource=cpu}",,,ignore\n',
            "other tags than its rows",
        ),
        ("telegraf_pressure.csv", 'pressure,"avg60{resource}",,,ignore\n', "expected field"),
        ("node_exporter.csv", "node_x_total,value,nic,tx_bytes,rate\n", "rate needs a float"),
    ],
)
def test_a_bad_table_is_refused(tmp_path: Path, table: str, append: str, message: str) -> None:
    copy = tmp_path / "foreign"
    shutil.copytree(_DIR, copy)
    with (copy / table).open("a") as handle:
        handle.write(append)
    with pytest.raises(SchemaError, match=message):
        load_foreign_mapping.__wrapped__(copy)


def test_a_table_must_give_every_tag_of_its_targets(tmp_path: Path) -> None:
    copy = tmp_path / "foreign"
    shutil.copytree(_DIR, copy)
    tags = copy / "tags.csv"
    tags.write_text(
        "".join(r for r in tags.read_text().splitlines(True) if ",ib_port,hca," not in r)
    )
    with pytest.raises(SchemaError, match=r"telegraf_infiniband gives ib_port no \['hca'\]"):
        load_foreign_mapping.__wrapped__(copy)


def test_sites_declare_their_own_tags() -> None:
    assert site_tags(env={}) == ("rack", "switch")
    assert site_tags(env={"REFLEX_SITE_TAGS": "pod,row pod"}) == ("rack", "switch", "pod", "row")
    with pytest.raises(ValueError, match="already a tag"):
        site_tags(env={"REFLEX_SITE_TAGS": "node"})
    with pytest.raises(ValueError, match="not a tag name"):
        site_tags(env={}, config={"site": {"tags": ["a b=c"]}})


def test_the_flow_keeps_each_nodes_site_tags_and_does_not_count_them_foreign() -> None:
    """Telegraf's global_tags put rack and switch on every point; the shard state remembers
    them per node (for the rule that blames a shared switch), and they are not foreign."""
    translator = ForeignTranslator(cluster="c")
    lines = [
        "infiniband,device=mlx5_0,host=n1,port=1,rack=r1,switch=leaf-3 symbol_error=0i 10",
        "infiniband,device=mlx5_0,host=n2,port=1,rack=r2,switch=leaf-3 symbol_error=0i 10",
        "infiniband,device=mlx5_0,host=n3,port=1 symbol_error=0i 10",
    ]
    points = [p for text in lines for p in translator.decode(text)[0]]
    state = ShardState(ShardConfig(site_tags=("rack", "switch")))
    out = state.on_batch(WindowBatch("shard-0", 0, 0, 10**10, frames_from_points(points)))
    assert state.sites == {"n1": {"rack": "r1", "switch": "leaf-3"},
                           "n2": {"rack": "r2", "switch": "leaf-3"}}  # fmt: skip
    carried = [p for route, item in out if route == "points" for p in item  # type: ignore[attr-defined]
               if p.measurement == "reflex_rejects" and p.tags["where"] == "carried"]  # fmt: skip
    assert carried == []
    undeclared = ShardState(ShardConfig(site_tags=()))
    out = undeclared.on_batch(WindowBatch("shard-0", 0, 0, 10**10, frames_from_points(points)))
    counted = [p.fields["records"] for route, item in out if route == "points"
               for p in item if p.measurement == "reflex_rejects"]  # type: ignore[attr-defined]  # fmt: skip
    assert counted == [2] and undeclared.sites == {}
