"""`repro history`: a workload's run medians over time from the ledger, the changes in them
(E-Divisive means, changepoints.py), and the `repro bisect` command for each. A command room
(floor 6): series.py selects and splits the records, analysis.py joins series and changes,
plot.py draws the PNG, cli.py prints the table and gates CI (`--fail-on-regression`)."""
