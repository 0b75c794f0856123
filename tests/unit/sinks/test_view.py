import threading
from dataclasses import FrozenInstanceError, replace

import pytest

from hangwatch.model import State
from hangwatch.redact import redacted, redacted_verdict
from hangwatch.watch.published import LatestView, Published, WatchView
from helpers.serve_fixtures import SECRET, make_verdict


def test_latest_view_is_a_watch_view():
    assert isinstance(LatestView("s"), WatchView)


def test_publish_swaps_the_whole_value_and_counts_ticks():
    # GIVEN a view with stacks
    view = LatestView("s")
    view.publish(Published(stacks={"TP0": []}), tick=True)
    # WHEN the next tick publishes a verdict and no stacks
    verdict = make_verdict()
    view.publish(Published(verdict=verdict, verdict_time=5.0), tick=True)
    # THEN the value is that tick's, whole: nothing of the one before stays
    latest = view.latest()
    assert latest.stacks == {} and latest.verdict is verdict and latest.verdict_time == 5.0
    assert latest.tick == 2


def test_a_published_value_is_frozen():
    with pytest.raises(FrozenInstanceError):
        Published().verdict = make_verdict()  # type: ignore[misc]


def test_new_verdict_without_time_is_stamped():
    view = LatestView("s")
    view.publish(Published(verdict=make_verdict()))
    assert view.latest().verdict_time is not None


def test_bundle_files_are_built_on_demand():
    calls = []
    view = LatestView("s")
    view.publish(Published(bundle=lambda: calls.append(1) or {"a": b"x"}))
    assert calls == []
    assert view.latest().bundle_files() == {"a": b"x"} and calls == [1]
    assert Published().bundle_files() == {}


def test_readers_never_see_a_torn_publish():
    # GIVEN a publisher replacing (verdict, stacks) together
    view = LatestView("s")
    stop = threading.Event()

    def publish() -> None:
        i = 0
        while not stop.is_set():
            i += 1
            view.publish(Published(verdict=make_verdict(since_s=float(i)), stacks={"n": [{"i": i}]}), tick=True)

    thread = threading.Thread(target=publish)
    thread.start()
    try:
        # WHEN readers read many times THEN every value is one tick's: its verdict and stacks agree
        for _ in range(2000):
            latest = view.latest()
            verdict = latest.verdict
            assert verdict is None or verdict.state is State.STALLED
            if verdict is not None:
                assert latest.stacks["n"][0]["i"] == int(verdict.since_s or 0)
    finally:
        stop.set()
        thread.join()
    assert view.latest().tick > 0


def test_a_sink_may_keep_what_it_read():
    view = LatestView("s")
    view.publish(Published(verdict=make_verdict()), tick=True)
    kept = view.latest()
    view.publish(replace(kept, verdict=None), tick=True)
    assert kept.verdict is not None and view.latest().verdict is None


def test_redacted_masks_strings_and_keys_at_any_depth():
    value = {"a": [f"HF_TOKEN={SECRET}", {"cmd": f"serve --api-key {SECRET}"}], f"x --hf-token {SECRET}": 1, "n": 2}
    text = repr(redacted(value))
    assert SECRET not in text and "<redacted>" in text and "'n': 2" in text


def test_redacted_verdict_keeps_the_to_dict_shape():
    verdict = make_verdict()
    out = redacted_verdict(verdict)
    assert out.keys() == verdict.to_dict().keys()
    assert SECRET not in repr(out)
