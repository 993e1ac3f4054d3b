"""The worker process (`worker_main`, `worker`: one framework per process) and what it shares with
the parent that started it: the event stream (`events`), the lifeline, pinning, seeding, the timed
loop (`measure`) and the machine's state around it (`machine`, `window`)."""
