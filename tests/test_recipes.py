"""docs/architecture.md's "Where to add" recipes, done (issue 57 item 3): each recipe's steps are
carried out in a scratch copy of the tree (src/ and conf/), exactly the steps the doc names and
nothing else, and what the doc says the addition gives is then asked of that copy through the real
CLI. The doc's bullet must name every step's file and its hook, so a recipe whose steps change in
the doc fails here until its test changes with it; and each recipe is done once more with a step
left out, which must fail: the steps are not only sufficient, each is needed."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"

pytestmark = pytest.mark.slow  # each recipe's check is a `python -m repro` of the scratch tree


@dataclass(frozen=True)
class Step:
    path: str  # relative to the tree
    doc: tuple[str, ...]  # the words of the doc's bullet that name this step: its place, its hook
    text: str = ""  # appended to the file (a new file where it does not exist)
    copy_from: str | None = None  # a file or folder of the tree copied to `path` first
    renames: tuple[tuple[str, str], ...] = ()  # then replaced in every file copied
    edit: tuple[str, str] | None = None  # (old, new): a line the doc says to add inside existing code
    hook: str = "@register"  # the decorator that registers what the step writes

    @property
    def registers(self) -> bool:
        return self.hook in self.doc

    def without_its_hook(self) -> "Step":
        """The step with its registration left out (the class written, not registered)."""
        return replace(self, text="".join(line for line in self.text.splitlines(keepends=True)
                                          if not line.startswith(self.hook)))


@dataclass(frozen=True)
class Recipe:
    title: str  # the doc's bullet, by its bold title
    steps: tuple[Step, ...]
    check: tuple[str, ...]  # `python -m repro ...` in the scratch tree ({tree}, {tmp}: its folders)
    refused: str | None  # what its refusal names (exit 2) before the recipe, or with a step left out
    gives: Callable[[subprocess.CompletedProcess, Path], bool] = lambda proc, tmp: (
        proc.returncode == 0 and "checked; nothing run or written" in proc.stdout)  # the steps done: what it adds


STATISTIC = Recipe("A verdict statistic", (
    Step("src/repro/report/statistic.py", ("report/statistic.py", "@register"), '''

@register
class Sign(PairedT):
    """A recipe's statistic: the paired t under another name."""

    name = "recipe-sign"
'''),), ("--dry-run", "-m", "framework=jax,torch", "model=mlp", "run.repeats=auto", "verdict.statistic=recipe-sign"),
    "verdict.statistic='recipe-sign' is not a registered statistic")

VENDOR = Recipe("A GPU vendor", (
    Step("src/repro/hardware.py", ("hardware.py", "@register"), '''

@register
class Acme(Vendor):
    name, platform = "acme", "gpu"

    def devices(self):
        return ({"name": "Acme X1", "memory_mib": 196608, "driver": "6.2.1"},)
'''),
    Step("conf/hardware/acme_x1.yaml", ("conf/hardware/",), '''name: acme_x1
platform: gpu
device_match: X1
device_count: 1
memory_gb: 192
peak_tflops: {fp32: 80.0}
check: true
'''),
), ("--dry-run", "framework=jax", "model=mlp", "hardware=acme_x1"), "acme_x1")

ZOO = Recipe("A model in the zoo", (
    Step("src/repro/models/recipe_mlp", ("src/repro/models/<name>/", "ZooModel", "dims_type"), copy_from="src/repro/models/mlp",
         renames=(('name = "mlp"', 'name = "recipe_mlp"'), ("class MLP(", "class RecipeMLP("))),
    Step("conf/model/recipe_mlp.yaml", ("conf/model/<name>.yaml",), copy_from="conf/model/mlp.yaml",
         renames=(("name: mlp", "name: recipe_mlp"),)),
), ("--dry-run", "framework=jax", "model=recipe_mlp"), "recipe_mlp")


LAUNCHER = Recipe("A launcher", (
    Step("src/repro/loop/recipe_rounds.py", ("loop/<name>_rounds.py", "rounds.Elsewhere", "@launcher"), '''"""A recipe's launcher: each round in this process, as the default does, under another name."""

from repro.loop import rounds
from repro.loop.launchers import HOST, Launch, launcher


class Recipe(rounds.Elsewhere):
    name = "recipe"

    def run_round(self, host, jobs, first_job_no, hooks=rounds.NO_HOOKS):
        host.say(f"round of {len(jobs)} job(s) run by the recipe's launcher")
        return rounds.InProcess().run_round(host, jobs, first_job_no, hooks)


@launcher("recipe", target="repro.loop.recipe_rounds.Recipe", where=HOST)
def _recipe(launch: Launch) -> Recipe:
    return Recipe()
''', hook="@launcher"),
    Step("conf/hydra/launcher/recipe.yaml", ("conf/hydra/launcher/<name>.yaml", "_target_"),
         "_target_: repro.loop.recipe_rounds.Recipe\n"),
), ("-m", "framework=torch", "model=mlp", "run.steps=6", "run.warmup=2", "verdict.canary=false", "hydra/launcher=recipe"),
    "recipe", lambda proc, tmp: proc.returncode == 0 and "round of 1 job(s) run by the recipe's launcher" in proc.stderr
    and "[1/1] ok" in proc.stdout)

@functools.lru_cache(maxsize=1)
def _quickstart_hashes() -> list[str]:
    """The config hash of each quickstart config, as the tree without the recipe plans it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run([sys.executable, "-m", "repro", "--dry-run", "+exp=quickstart"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return re.findall(r" config ([0-9a-f]{12}) ", proc.stdout)


KEY = Recipe("A config key", (
    Step("src/repro/config/schema.py", ("config/schema.py",), edit=(
        "    seed: int = non_negative(0)  # the seed of weights, data and every RNG the run draws from\n",
        "    seed: int = non_negative(0)  # the seed of weights, data and every RNG the run draws from\n"
        "    recipe_knob: int = 0  # a recipe's key\n")),
    Step("conf/config.yaml", ("conf/config.yaml", "meaning line"), edit=("  seed: 0\n", "  seed: 0\n  recipe_knob: 0  # a recipe's key\n")),
    Step("src/repro/config/spec.py", ("config/spec.py", "ADDED_AT_DEFAULT"), edit=(
        "ADDED_AT_DEFAULT = {", 'ADDED_AT_DEFAULT = {"run.recipe_knob": 0, ')),
), ("--dry-run", "+exp=quickstart", "run.recipe_knob=0"), None,  # the key set, at its default: every config's identity as it was
    lambda proc, tmp: proc.returncode == 0 and re.findall(r" config ([0-9a-f]{12}) ", proc.stdout) == _quickstart_hashes())

REPORT = Recipe("A report section", (
    Step("src/repro/report/markdown.py", ("report/markdown.py", "Comparison"), '''

def recipe_lines(comparison: Comparison) -> list[str]:
    return ["## Recipe", "", f"{len(comparison.tables)} table(s) in this sweep.", ""]
'''),
    Step("src/repro/report/markdown.py", ("markdown.page",), edit=(
        '        "## Plots", "",\n    ]', '        *recipe_lines(comparison),\n        "## Plots", "",\n    ]')),
), ("report", "--ledger", "{tree}/ledger", "--experiment", "quickstart", "--out", "{tmp}/report"), None,
    lambda proc, tmp: proc.returncode == 0 and re.search(r"\n## Recipe\n\n\d+ table\(s\) in this sweep\.\n",
                                                         (tmp / "report" / "report.md").read_text()) is not None)


def bullet(title: str) -> str:
    """The doc's recipe: its bullet under "Where to add", up to the next one."""
    text = DOC.read_text().split("## Where to add", 1)[1].split("\n## ", 1)[0]
    m = re.search(rf"^- \*\*{re.escape(title)}\*\*.*?(?=^- \*\*|\Z)", text, re.S | re.M)
    assert m, f"docs/architecture.md has no recipe '{title}' under 'Where to add'"
    return " ".join(m[0].split())


def scratch(tmp: Path) -> Path:
    tree = tmp / "tree"
    for part in ("src", "conf", "ledger"):
        shutil.copytree(ROOT / part, tree / part, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    return tree


def follow(tree: Path, steps) -> None:
    for step in steps:
        target = tree / step.path
        target.parent.mkdir(parents=True, exist_ok=True)
        if step.copy_from:
            source = tree / step.copy_from
            shutil.copytree(source, target) if source.is_dir() else shutil.copy(source, target)
            for f in [target] if target.is_file() else [f for f in target.rglob("*") if f.is_file()]:
                text = f.read_text()
                for old, new in step.renames:
                    text = text.replace(old, new)
                f.write_text(text)
        if step.text:
            with target.open("a") as f:
                f.write(step.text)
        if step.edit:
            text = target.read_text()
            assert text.count(step.edit[0]) == 1, (step.path, step.edit[0])  # the recipe's place, found once
            target.write_text(text.replace(*step.edit))


def check(tree: Path, recipe: Recipe, tmp: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "REPRO_ROOT": str(tree),
           "XDG_CACHE_HOME": str(tmp / "cache"), "REPRO_MACHINE_DIR": str(tmp / "machine")}
    args = [a.format(tree=tree, tmp=tmp) for a in recipe.check]
    run_args = [] if args[0] == "report" else [f"ledger.dir={tmp / 'ledger'}"]
    return subprocess.run([sys.executable, "-m", "repro", *args, *run_args],
                          cwd=tree, env=env, capture_output=True, text=True, timeout=600)


def refused(proc: subprocess.CompletedProcess, recipe: Recipe, tmp: Path) -> bool:
    """Not what the recipe gives: refused naming it (exit 2) where it has a refusal, else only not given."""
    if recipe.refused is not None:
        return proc.returncode == 2 and recipe.refused in proc.stderr
    return not recipe.gives(proc, tmp)


@pytest.mark.parametrize("recipe", [STATISTIC, VENDOR, ZOO, LAUNCHER, KEY, REPORT], ids=lambda r: r.title)
def test_a_recipe_done_as_the_doc_says_works_and_each_step_is_needed(recipe, tmp_path):
    said = bullet(recipe.title)
    for step in recipe.steps:  # the doc names each step the test takes: where, and its hook
        assert all(words in said for words in step.doc), (recipe.title, step.doc, said)
    untouched = check(scratch(tmp_path / "before"), recipe, tmp_path / "before")
    assert refused(untouched, recipe, tmp_path / "before"), untouched.stderr[-2000:]  # the recipe adds something
    tree = scratch(tmp_path / "done")
    follow(tree, recipe.steps)
    done = check(tree, recipe, tmp_path / "done")
    assert recipe.gives(done, tmp_path / "done"), done.stdout[-2000:] + done.stderr[-2000:]
    for i, left_out in enumerate(recipe.steps):  # the planted break: a recipe missing a step
        broken = scratch(tmp_path / f"without{i}")
        follow(broken, [s if s is not left_out else s.without_its_hook() for s in recipe.steps if s is not left_out
                        or s.registers])
        failed = check(broken, recipe, tmp_path / f"without{i}")
        assert refused(failed, recipe, tmp_path / f"without{i}"), (left_out.path, failed.stderr[-1000:])
