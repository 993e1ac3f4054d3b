"""First contact with the command line: help, version, typos, refusals, --dry-run, progress
for logs, no litter, uncut tables, DVC from a fresh clone, the Python API, shell completion.

Most tests call the CLI's dispatch in-process or run a subprocess that starts no worker; the
few real runs share one sandbox."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

import repro
from conftest import Sandbox
from repro import cli, paths
from repro.config import config_hash
from repro import preflight

REPO = paths.repo_root()
BIN = Path(sys.executable).parent


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "COLUMNS")}
    env["PATH"] = f"{BIN}{os.pathsep}{env['PATH']}"  # `repro`, `dvc` and `python` of this interpreter
    env.update(extra)
    return env


def _repro(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "repro", *args], cwd=cwd, env=_env(**env), capture_output=True,
                          text=True, timeout=300)


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _leaves(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()):
    """(words, parser) of every runnable subcommand, nested ones (`ledger list`) included."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield words, parser
    for action in subs:
        for name, child in action.choices.items():
            yield from _leaves(child, (*words, name))


# ---- help, version, typos -------------------------------------------------------------------

@pytest.mark.slow
def test_bare_repro_prints_help_and_writes_nothing(tmp_path):
    ledger_before = _files(REPO / "ledger")
    bare = _repro(tmp_path, MLFLOW_TRACKING_URI=f"sqlite:///{tmp_path}/mlflow.db")
    assert bare.returncode == 0, bare.stderr
    assert _files(tmp_path) == [] and _files(REPO / "ledger") == ledger_before
    _, sub = cli.build_parser()
    assert set(sub.choices) >= {"ledger", "models", "replay", "compare", "ir"}
    for name in sub.choices:  # every registered subcommand, with its one-line description
        assert f"  {name:<13} " in bare.stdout, name
    for text in ("framework=", "torch_compile", "+exp=", "quickstart", "repro run", "--hydra-help", "--dry-run",
                 "--shell-completion install=bash"):
        assert text in bare.stdout, text
    assert _repro(tmp_path, "--help").stdout == bare.stdout


def test_help_flags_and_version_in_process(capsys):
    assert cli.dispatch(["-h"]) == 0
    assert "Commands:" in capsys.readouterr().out
    assert cli.dispatch(["framework=torch", "--help"]) == 0  # with overrides: still repro's help
    assert "Commands:" in capsys.readouterr().out
    frameworks = {"torch", "jax", "flax"}
    already = frameworks & set(sys.modules)
    assert cli.dispatch(["--version"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"repro {repro.__version__}") and "\njax " in out and "\ntorch " in out
    assert frameworks & set(sys.modules) == already  # read from package metadata, nothing imported


@pytest.mark.parametrize("argv, hint", [(["ledgr", "list"], "did you mean 'ledger'?"),
                                        (["modles"], "did you mean 'models'?"),
                                        (["help"], "did you mean 'repro --help'?")])
def test_unknown_command_suggests_and_exits_2(capsys, argv, hint):
    assert cli.dispatch(argv) == 2
    err = capsys.readouterr().err
    assert f"unknown command '{argv[0]}' — {hint}" in err and "repro --help" in err


def test_every_subcommand_help_has_examples():
    _, sub = cli.build_parser()
    for name, parser in sub.choices.items():
        assert "examples:\n  repro " in parser.format_help(), name


def test_missing_ledger_is_refused_by_every_subcommand_that_reads_one(capsys, tmp_path):
    parser, _ = cli.build_parser()
    missing = tmp_path / "no" / "such"
    checked = []
    for words, leaf in _leaves(parser):
        if not any("--ledger" in a.option_strings for a in leaf._actions):
            continue
        positionals = ["x" for a in leaf._actions if not a.option_strings and a.nargs != 0]
        positionals += [arg for a in leaf._actions if a.required and a.option_strings for arg in (a.option_strings[0], "x")]
        positionals += [arg for g in leaf._mutually_exclusive_groups if g.required
                        for arg in (g._group_actions[0].option_strings[0], "x")]
        assert cli.dispatch([*words, *positionals, "--ledger", str(missing)]) == 2, words
        err = capsys.readouterr().err
        assert f"--ledger {missing}: no such folder" in err and "leave --ledger out" in err
        checked.append(words)
    assert {("ledger", "list"), ("ledger", "verify"), ("replay",), ("compare",), ("ir", "diff")} <= set(checked)
    assert not missing.exists()


# ---- refusals and the dry run ---------------------------------------------------------------

@pytest.mark.slow
def test_capture_ir_without_ir_is_refused_writing_nothing(tmp_path):
    box = Sandbox(tmp_path, store_template=False)  # nothing written: no store either
    proc = box.run("framework=torch", "run.capture_ir=true")
    assert proc.returncode == 2
    assert "run.capture_ir=true: framework=torch produces no IR" in proc.stderr
    assert "jax, torch_xla, torch_xla_compile" in proc.stderr and "run.capture_ir=false" in proc.stderr
    assert _files(tmp_path) == []
    with pytest.raises(repro.ConfigError, match="framework=torch_compile produces no IR"):
        preflight.plan(["framework=torch_compile", "run.capture_ir=true"])
    with pytest.raises(repro.ConfigError, match=r"progress.interval_s=0.0 must be > 0"):
        preflight.plan(["progress.interval_s=0"])


@pytest.mark.slow
def test_dry_run_lists_the_quickstart_jobs_and_writes_nothing(tmp_path):
    box = Sandbox(tmp_path, store_template=False)  # nothing written: no store either
    proc = subprocess.run(box.repro_cmd("+exp=quickstart", "--dry-run"), cwd=tmp_path, env=box.env(),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    plan = preflight.plan(["+exp=quickstart", f"ledger.dir={box.ledger}"])
    lines = [line for line in proc.stdout.splitlines() if line.startswith("[")]
    assert len(lines) == len(plan.configs) == len(plan.jobs) == 4 and plan.runs == 12  # each config once; 3 rounds
    assert proc.stdout.startswith("repro --dry-run: 4 configs × 3 runs = 12 jobs, checked; nothing run or written\n"
                                  f"ledger {box.ledger}\nmlflow {box.uri} (experiment quickstart)\n")
    for line, (config, _) in zip(lines, plan.configs):
        assert f"model={config.model.name} framework={config.framework.name} " in line
        assert f"config {config_hash(config)[:12]} · ×3 · no history" in line  # a new ledger: no estimate
    assert "no history for 12 of 12 jobs on this hardware: no estimate" in proc.stdout
    assert _files(tmp_path) == []


# ---- progress, litter, tables ---------------------------------------------------------------

def test_plain_progress_one_line_per_interval_with_eta(capsys):
    from repro.report.progress import Display

    now = [0.0]
    display = Display("plain", 1, interval_s=2.0, clock=lambda: now[0])
    display.job_started(0, "torch mlp/tiny fp32", 1000)
    step_s = 1 / 64  # exact in binary: the clock adds up without rounding
    for step in range(1, 1001):  # a 5 s compile step, then an event per step
        now[0] += 5.0 if step == 1 else step_s
        display.event(0, {"event": "step", "step": step, "steps": 1000, "step_s": step_s, "loss": 1.0})
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("[1/1]   step 1/1000 (compile)  step 15.62 ms  loss 1.0000")
    timed = lines[2:]  # one line per 2 s = 128 steps, and the last step
    assert [line.split()[2] for line in timed] == [f"{1 + 128 * k}/1000" for k in range(1, 8)] + ["1000/1000"]
    assert "elapsed 7.0s  ETA 13.6s" in timed[0] and "ETA" not in timed[-1]


@pytest.fixture(scope="module")
def box(tmp_path_factory) -> Sandbox:
    """The sandbox of this module's real runs (one MLflow store: creating one takes seconds)."""
    return Sandbox(tmp_path_factory.mktemp("clirun"))


@pytest.fixture(scope="module")
def cli_run(box):
    """One real run through `repro run`, whose cache folder is its own."""
    cache = box.root.parent / f"{box.root.name}-cache"
    proc = subprocess.run(box.repro_cmd("run", "framework=torch", "run.steps=8", "progress.interval_s=0.1"),
                          cwd=box.root, env=box.env(XDG_CACHE_HOME=str(cache)), capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return box, cache, proc


@pytest.mark.slow
def test_run_leaves_no_hydra_folders_in_the_cwd(cli_run):
    box, cache, proc = cli_run
    assert not {"outputs", "multirun", ".hydra", "app.log"} & {p.name for p in box.root.iterdir()}
    assert not [p for p in box.root.rglob("*.log")  # (mlruns: the store's worker logs; the projector's queue and log)
                if "mlruns" not in p.parts and ".mlflow-pending" not in p.parts]
    # The job ran from the preflight plan's composed config (app.run_plan): Hydra made no run folder.
    assert not (cache / "repro" / "hydra").exists()
    (record,) = box.heads()
    assert record["status"] == "ok" and record["overrides"] == [  # `run` is the word, not an override
        "framework=torch", "run.steps=8", "progress.interval_s=0.1", f"ledger.dir={box.ledger}", "progress.mode=plain"]
    assert "step 1/8 (compile)" in proc.stdout and "step 8/8" in proc.stdout


def test_tables_off_a_terminal_are_not_cut(capsys, monkeypatch):
    from repro.models.listing import model_table

    monkeypatch.delenv("COLUMNS", raising=False)
    assert cli.dispatch(["models"]) == 0
    out = capsys.readouterr().out
    assert "…" not in out
    for row in model_table():
        assert f"{row.params:,}" in out, row


# ---- DVC from a fresh clone -----------------------------------------------------------------

@pytest.mark.slow
def test_dvc_repro_in_a_fresh_clone(tmp_path):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True, env=_env())
    proc = subprocess.run(["dvc", "repro"], cwd=clone, env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (clone / "data" / "digits" / "train_x.npy").exists() and not (clone / "params.yaml").exists()
    assert (clone / "dvc.lock").read_text() == (REPO / "dvc.lock").read_text()


# ---- the Python API -------------------------------------------------------------------------

@pytest.mark.slow
def test_python_api_runs_sweeps_and_reads_the_ledger(box, cli_run, tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", box.uri)  # the store cli_run created
    monkeypatch.chdir(tmp_path)
    ledger = tmp_path / "ledger"
    common = {"run.steps": 8, "ledger.dir": str(ledger), "progress.mode": "none", "tracking.experiment": "api"}
    record = repro.run(framework="torch", model="mlp", **common)
    assert record["status"] == "ok" and record["config"]["framework"]["name"] == "torch"
    records = repro.sweep(framework=["jax", "torch"], **common)
    assert [(r["status"], r["config"]["framework"]["name"]) for r in records] == [("ok", "jax"), ("ok", "torch")]
    assert len({r["sweep"]["id"] for r in records}) == 1 and records[0]["sweep"]["jobs"] == 2
    heads = repro.Ledger(ledger).heads(kind="run")
    assert {h["id"] for h in heads} == {record["id"], *(r["id"] for r in records)}
    runs = box.mlflow_runs("api")
    assert {r.data.tags["repro.ledger_id"] for r in runs if "repro.ledger_id" in r.data.tags} >= {record["id"]}
    with pytest.raises(repro.ConfigError, match="framework/jaxx"):
        repro.run(framework="jaxx", **common)
    with pytest.raises(repro.ConfigError, match="repro.sweep"):
        repro.run(framework=["jax", "torch"], **common)
    with pytest.raises(repro.ConfigError, match="plans 4 configs"):  # an exp that sweeps is not one run
        repro.run(**{"+exp": "quickstart"}, **common)
    assert len(repro.Ledger(ledger).heads(kind="run")) == 3  # refused configs wrote nothing
    again = repro.run(framework="jax", model="mlp", **{**common, "run.repeats": 2})
    repeated = [h for h in repro.Ledger(ledger).heads(kind="run") if h.get("repeat")]
    assert again["repeat"]["index"] == 0 and sorted(h["repeat"]["index"] for h in repeated) == [0, 1]  # twice, not 4×
    assert not {"outputs", "multirun"} & {p.name for p in tmp_path.iterdir()}


@pytest.mark.slow
def test_import_repro_is_cheap():
    code = "import sys, repro; assert repro.__version__; print(sorted(m for m in ('hydra', 'omegaconf', " \
           "'mlflow', 'torch', 'jax', 'rich') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], env=_env(), capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ---- shell completion -----------------------------------------------------------------------

COMPLETE = """eval "$(repro --shell-completion install=bash)"
complete_line() {
    COMP_LINE="$1"; COMP_POINT=${#1}; read -ra COMP_WORDS <<< "$1"
    [[ "$1" == *" " ]] && COMP_WORDS+=("")
    COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
    hydra_bash_completion; echo "${COMPREPLY[*]}"
}
"""


@pytest.mark.slow
def test_shell_completion_of_commands_and_config_keys(tmp_path):
    lines = ["repro led", "repro ledger ", "repro ledger l", "repro framework=torch_x", "repro run model=ml"]
    script = COMPLETE + "".join(f'complete_line "{line}"\n' for line in lines)
    proc = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=_env(), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    led, ledger, ledger_l, framework, run_model = (set(line.split()) for line in proc.stdout.splitlines())
    assert "ledger" in led
    assert {"list", "show", "verify", "diff", "--ledger"} <= ledger and ledger_l == {"list"}
    assert framework == {"framework=torch_xla", "framework=torch_xla_compile"}
    assert run_model == {"model=mlp"}


def test_each_verb_is_registered_by_the_module_it_is_listed_under():
    """`repro VERB` imports VERB's module alone (cli.VERB_MODULES): each lists the verb it registers."""
    for verb in cli.VERB_MODULES:
        assert list(cli.build_parser(verb)[1].choices) == [verb], verb
    assert list(cli.build_parser()[1].choices) == list(cli.VERB_MODULES)


@pytest.mark.slow  # a fresh interpreter: what one verb imports
def test_a_ledger_command_imports_no_numpy(tmp_path):
    import shutil

    shutil.copytree(REPO / "ledger", tmp_path / "ledger")
    probe = ("import sys; from repro.cli import dispatch; rc = dispatch(sys.argv[1:]); "
             "print(rc, 'numpy' in sys.modules, file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", probe, "ledger", "list", "--ledger", str(tmp_path / "ledger")],
                          capture_output=True, text=True, check=True)
    assert proc.stderr.strip().splitlines()[-1] == "0 False", proc.stderr[-2000:]
    assert proc.stdout.count("\n") > 3  # the records were listed
