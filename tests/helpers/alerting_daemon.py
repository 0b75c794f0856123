"""A tiny hangwatch-like daemon for the kill -9 test: history store + webhook alerts + the API.

    cd tests && python -m helpers.alerting_daemon DB WEBHOOK_URL STATE

Feeds a verdict of STATE every 50 ms (as a watch loop would), prints `ready URL` once the first
verdict is decided and its alerts are delivered, then runs until it is killed.
"""

import sys
import time

from hangwatch.model import State
from hangwatch.sinks.alerts import AlertDispatcher, RetryPolicy, WebhookSink
from hangwatch.sinks.api import create_app, serve_in_thread
from hangwatch.sinks.store import HistoryStore
from hangwatch.watch.published import LatestView, Published
from helpers.serve_support import make_verdict


def main(db: str, url: str, state: str) -> None:
    store = HistoryStore(db)
    dispatcher = AlertDispatcher([WebhookSink(url, timeout=2.0)], store, policy=RetryPolicy(attempts=3, base_s=0.1))
    view = LatestView("srv")
    handle = serve_in_thread(create_app(view, store=store), "127.0.0.1", 0)
    verdict = make_verdict(State(state), None if state in ("ready", "progressing") else "nccl_peer_exited")
    view.publish(Published(verdict=verdict), tick=True)
    dispatcher.on_verdict(verdict, "srv")
    dispatcher.flush(10)
    print("ready", handle.url, flush=True)
    while True:
        view.publish(Published(verdict=verdict), tick=True)
        dispatcher.on_verdict(verdict, "srv")
        time.sleep(0.05)


if __name__ == "__main__":
    main(*sys.argv[1:4])
