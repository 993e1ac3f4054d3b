"""The sweep loop and its launcher adapters: which job runs when (`sweep`), a round handed to where
it runs (`rounds`: the protocol and the in-process adapter; `submitit_rounds`, `joblib_rounds`), and
a flagged round run again (`rerun`)."""
