from dataclasses import replace

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from hangwatch import __version__
from hangwatch.model import State
from hangwatch.sinks.metrics import make_registry
from helpers.serve_fixtures import make_verdict, make_view

SERVER = "sglang pid 100 on localhost:30000"


def sample(registry, name, **labels):
    return registry.get_sample_value(name, {"server": SERVER, "host": "node-a", **labels})


def test_state_set_and_phase_per_rank():
    registry = make_registry(make_view(make_verdict()), host="node-a", process=False)
    assert sample(registry, "hangwatch_state", hangwatch_state="stalled") == 1
    assert sample(registry, "hangwatch_state", hangwatch_state="ready") == 0
    assert sample(registry, "hangwatch_rank_phase", rank="TP1", hangwatch_rank_phase="launch") == 1
    assert sample(registry, "hangwatch_rank_phase", rank="TP1", hangwatch_rank_phase="dist_init") == 0


def test_cause_progress_and_stall_seconds():
    registry = make_registry(make_view(make_verdict()), host="node-a", process=False)
    assert sample(registry, "hangwatch_cause_info", cause="nccl_peer_exited", rule="sglang.nccl_peer_exited",
                  state="stalled") == 1
    assert sample(registry, "hangwatch_cause_confidence", cause="nccl_peer_exited",
                  rule="sglang.nccl_peer_exited") == 0.9
    assert sample(registry, "hangwatch_seconds_since_progress") == 42.0
    assert sample(registry, "hangwatch_stalled_seconds", rank="TP1", phase="launch") == 42.0
    assert sample(registry, "hangwatch_info", version=__version__) == 1


def test_gpus_latencies_and_ticks():
    registry = make_registry(make_view(make_verdict()), host="node-a", process=False)
    assert sample(registry, "hangwatch_gpu_memory_used_bytes", gpu="0") == 1024 * 1024 * 1024
    assert sample(registry, "hangwatch_gpu_utilization_ratio", gpu="0") == 1.0
    assert sample(registry, "hangwatch_sampler_latency_seconds", sampler="stacks") == 0.25
    assert sample(registry, "hangwatch_ticks_total") == 1


def test_before_the_first_verdict_states_are_all_false_and_no_cause():
    registry = make_registry(make_view(None), host="node-a", process=False)
    assert all(sample(registry, "hangwatch_state", hangwatch_state=s.value) == 0 for s in State)
    assert sample(registry, "hangwatch_cause_info", cause="nccl_peer_exited") is None


def test_each_scrape_reads_the_view_afresh():
    view = make_view(make_verdict())
    registry = make_registry(view, host="node-a", process=False)
    view.publish(replace(view.latest(), verdict=make_verdict(State.READY, cause=None)))
    assert sample(registry, "hangwatch_state", hangwatch_state="ready") == 1
    assert sample(registry, "hangwatch_stalled_seconds", rank="TP1", phase="launch") is None


def test_exposition_parses_and_has_process_metrics():
    text = generate_latest(make_registry(make_view(make_verdict()))).decode()
    names = {family.name for family in text_string_to_metric_families(text)}
    assert {"hangwatch_state", "hangwatch_rank_phase", "hangwatch_cause_info", "process_resident_memory_bytes"} <= names


def test_agent_info_names_the_url_and_the_launch_label():
    from hangwatch.sinks.launchid import AgentLabels

    agent = AgentLabels(launch_label="run-7")
    registry = make_registry(make_view(make_verdict()), host="node-a", process=False, agent=agent)
    agent.set_url("http://10.0.0.5:9464")
    assert sample(registry, "hangwatch_agent_info", url="http://10.0.0.5:9464", launch="run-7", node_rank="",
                  nnodes="") == 1


def test_verdict_info_has_state_phase_and_cause_in_one_series():
    registry = make_registry(make_view(make_verdict()), host="node-a", process=False)
    assert sample(registry, "hangwatch_verdict_info", state="stalled", phase="dist_init", cause="nccl_peer_exited") == 1
    assert make_registry(make_view(None), host="node-a", process=False).get_sample_value(
        "hangwatch_verdict_info", {"server": SERVER, "host": "node-a", "state": "stalled"}) is None


def test_agent_info_never_carries_credentials_of_the_public_url():
    from hangwatch.sinks.launchid import AgentLabels

    agent = AgentLabels()
    agent.set_url("http://admin:hunter2@node7:9464")
    text = generate_latest(make_registry(make_view(make_verdict()), process=False, agent=agent)).decode()
    assert "hunter2" not in text and 'url="http://node7:9464"' in text
