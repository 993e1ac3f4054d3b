"""One job's parent side: its records (`job`), what it asks of its sweep (`host`), its worker started
(`launch`, `warm`), the code it runs (`snapshot`), its ranks, nodes and scheduler (`cluster`,
`scheduler`) and the telemetry read around it (`canary`, `wall_split`)."""
