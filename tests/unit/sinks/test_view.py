import threading

from hangwatch.model import State
from hangwatch.redact import redacted, redacted_verdict
from hangwatch.watch.published import StaticView, WatchView
from helpers.serve_fixtures import SECRET, make_verdict


def test_static_view_is_a_watch_view():
    assert isinstance(StaticView("s"), WatchView)


def test_publish_replaces_only_what_is_given():
    # GIVEN a view with stacks
    view = StaticView("s")
    view.publish(stacks={"TP0": []}, tick=True)
    # WHEN only a verdict is published
    verdict = make_verdict()
    view.publish(verdict=verdict, verdict_time=5.0, tick=True)
    # THEN the stacks stay and the ticks count
    assert view.stacks() == {"TP0": []}
    assert view.verdict() is verdict and view.verdict_time() == 5.0
    assert view.tick_count() == 2


def test_new_verdict_without_time_is_stamped():
    view = StaticView("s")
    view.publish(verdict=make_verdict())
    assert view.verdict_time() is not None


def test_bundle_files_may_be_a_callable_run_on_demand():
    calls = []
    view = StaticView("s")
    view.publish(bundle_files=lambda: calls.append(1) or {"a": b"x"})
    assert calls == []
    assert view.bundle_files() == {"a": b"x"} and calls == [1]


def test_readers_never_see_a_torn_publish():
    # GIVEN a publisher replacing (verdict, stacks) together
    view = StaticView("s")
    stop = threading.Event()

    def publish() -> None:
        i = 0
        while not stop.is_set():
            i += 1
            view.publish(verdict=make_verdict(since_s=float(i)), stacks={"n": [{"i": i}]}, tick=True)

    thread = threading.Thread(target=publish)
    thread.start()
    try:
        # WHEN readers read many times THEN every value is a whole published value
        for _ in range(2000):
            verdict = view.verdict()
            assert verdict is None or verdict.state is State.STALLED
            assert isinstance(view.stacks().get("n", [{}])[0], dict)
    finally:
        stop.set()
        thread.join()
    assert view.tick_count() > 0


def test_redacted_masks_strings_and_keys_at_any_depth():
    value = {"a": [f"HF_TOKEN={SECRET}", {"cmd": f"serve --api-key {SECRET}"}], f"x --hf-token {SECRET}": 1, "n": 2}
    text = repr(redacted(value))
    assert SECRET not in text and "<redacted>" in text and "'n': 2" in text


def test_redacted_verdict_keeps_the_to_dict_shape():
    verdict = make_verdict()
    out = redacted_verdict(verdict)
    assert out.keys() == verdict.to_dict().keys()
    assert SECRET not in repr(out)
