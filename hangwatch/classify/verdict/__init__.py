"""The verdict: one `Evidence` and the rules -> a `Verdict` (pure; `classify` in classifier.py).

    classifier   matching every rule, ranking the matches, the state and the verdict
    context      derived views of one `Evidence` that atoms and the classifier read
    logscan      the log searched per pattern, chunked, with literal prefilters
    memo         `ScanMemo`: the log caches a watcher keeps between ticks
    pasted       evidence pasted into a report (log dumps, nvidia-smi) folded in
    ending       how a start ended when no process view says (the log's last fatal line)
    stopping     a stop someone asked for versus a crash
    raise_sites  the first failure's engine raise site -> its cause and evidence
    priors       where the start stopped -> the causes that stop a start there
    differential the other causes to check, ranked, when the top one is not certain
    waiton       what one thread waits on, from its frames
    waitfor      the wait-for graph across ranks and its final blocker
    stacktree    every rank's main-thread stack merged into one tree
    ceilings     how long a phase may take before `starting` becomes a stall
"""
