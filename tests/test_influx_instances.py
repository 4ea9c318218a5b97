"""Two real InfluxDB servers, each holding half of a simulated fleet (as two rack groups' agents
would write them), give the flow the same events as one server holding the whole fleet."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from test_flow_influx import SECONDS, simulated_lines, write_lines

from reflex_localize.flows.io.influx_instances import InstancesSource
from reflex_localize.flows.io.influx_source import InfluxSource
from reflex_localize.flows.runner import run_in_process
from reflex_localize.influx.local_server import InfluxServer, start_influxdb
from reflex_localize.schemas.line_file import raw_tag

pytestmark = [pytest.mark.influx, pytest.mark.slow]
BUCKET = "fleet"


@pytest.fixture(scope="module")
def second_server() -> Iterator[InfluxServer]:
    with start_influxdb() as server:
        yield server


def test_two_instances_each_with_half_the_fleet_find_the_events_of_one(
    influx: InfluxServer, second_server: InfluxServer
) -> None:
    lines, start = simulated_lines(SECONDS)
    nodes = sorted({node for line in lines if (node := raw_tag(line, "node")) is not None})
    first_half = set(nodes[: len(nodes) // 2])
    whole, halves = "fleet-whole", "fleet-half"
    influx.create_bucket(whole)
    write_lines(influx, whole, lines)
    influx.create_bucket(halves)
    second_server.create_bucket(halves)
    # Lines without a node tag (none in this capture) would go to the first instance.
    write_lines(influx, halves, [line for line in lines if raw_tag(line, "node") in first_half])
    write_lines(
        second_server, halves, [line for line in lines if raw_tag(line, "node") not in first_half]
    )
    stop = start + SECONDS * 10**9

    def source(server: InfluxServer, bucket: str) -> InfluxSource:
        return InfluxSource(server.settings(bucket), n_shards=3, start_ns=start, stop_ns=stop,
                            clock=lambda: stop + 60 * 10**9)  # fmt: skip

    one = run_in_process(source(influx, whole))
    two = run_in_process(InstancesSource([source(influx, halves), source(second_server, halves)]))
    assert one.events, "the XID 79 must be localized"
    assert [e.to_json() for e in two.events] == [e.to_json() for e in one.events]
    assert two.error_counts == one.error_counts
