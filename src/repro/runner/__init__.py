"""Running one job: the parent side (`job`, `launch`) and the worker process (`worker`)."""
