"""The generated reference: a Sphinx extension that fills docs/reference/{config,ledger}.md at build time
and checks the command reference's parsers (docs/reference/cli.md renders them through sphinx-argparse).

Nothing here is written by hand: each page is read from the code it documents, so it cannot drift.

- config.md: every group and key of `repro.config.schema` with its type, default and allowed values (the
  field's metadata) and its meaning: `metadata["doc"]` where a field has one, else the comment on the
  field's line or the comment lines right above it (the schema's own convention). A key with no meaning
  fails the build, naming it (`MissingMeaning`).
- cli.md: `repro --help` (`help_text()`) and every command, subcommand and option from the argparse parsers
  (`repro.cli.build_parser`, rendered by sphinx-argparse); an option without a help line fails the build.
- ledger.md: the record's fields and statuses from `repro.ledger.schema` (what `repro ledger schema` prints).

The files in docs/reference/ hold one line each; the page is made in memory (Sphinx's `source-read`), never
written to the tree. `python docs/_ext/reference.py OUT` writes the pages to OUT to look at.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import io
import json
import os
import sys
import tokenize
from pathlib import Path

HELP_WIDTH = "100"  # argparse wraps --help to $COLUMNS: the same page on any terminal


class MissingMeaning(Exception):
    """A config key (or ledger field, or command option) the reference cannot explain."""


# ---- config ------------------------------------------------------------------------------------

def field_comments(source: str) -> dict[tuple[str, str], str]:
    """{(class name, field name): its comment} from a module's source: the comment lines right above
    the field (no blank line between) followed by the comment on the field's own line(s)."""
    lines = source.splitlines()
    comments: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.string.lstrip("#").strip()
    found = {}
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ClassDef):
            continue
        for stmt in node.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            above, n = [], stmt.lineno - 1
            while n >= 1 and lines[n - 1].strip().startswith("#"):
                above.insert(0, comments[n])
                n -= 1
            trailing = [comments[i] for i in range(stmt.lineno, stmt.end_lineno + 1)
                        if i in comments and not lines[i - 1].strip().startswith("#")]
            if text := " ".join(above + trailing).strip():
                found[(node.name, stmt.target.id)] = text
    return found


def meaning(cls: type, f: dataclasses.Field, comments: dict) -> str:
    return f.metadata.get("doc") or comments.get((cls.__name__, f.name), "")


def _default(f: dataclasses.Field):
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def _shown(value) -> str:
    return "`" + json.dumps(value) + "`" if not isinstance(value, str) or value else '`""`'


def _allowed(f: dataclasses.Field) -> str:
    if "choices" in f.metadata:
        return ", ".join(f"`{c}`" for c in f.metadata["choices"])
    if "bound" in f.metadata:
        return f.metadata["bound"]
    return "`true`, `false`" if f.type in ("bool", bool) else ""


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def config_keys(schema) -> list[tuple[str, type, dataclasses.Field]]:
    """(group, group class, field) for every key the schema declares, `model`'s common keys included."""
    keys = []
    for group in dataclasses.fields(schema.Config):
        if group.name == "model":
            continue
        cls = group.default_factory
        keys += [(group.name, cls, f) for f in dataclasses.fields(cls)]
    model = schema.model_schema(_ExampleModel)
    keys += [("model", model, f) for f in dataclasses.fields(model) if f.name in schema.MODEL_KEYS]
    return keys


class _ExampleModel:  # model_schema() reads a model's name and presets; the common keys are every model's
    name, presets = "mlp", {"tiny": {}}

    @staticmethod
    def resolve_preset(preset):
        return "tiny"


def config_page(schema=None, groups: dict | None = None) -> tuple[str, int]:
    """The config reference and the count of keys it documents; MissingMeaning names every key without one."""
    if schema is None:
        from repro.config import schema
    if groups is None:
        from repro.cli import _groups
        groups = _groups()
    comments = field_comments(Path(schema.__file__).read_text())
    keys = config_keys(schema)
    missing = [f"{g}.{f.name}" for g, cls, f in keys if not meaning(cls, f, comments)]
    if missing:
        raise MissingMeaning(f"{len(missing)} config key(s) without a meaning line in {schema.__file__} "
                             f"(a comment on or above the field, or metadata['doc']): {', '.join(missing)}")
    out = ["# Config reference", "",
           "Generated from `src/repro/config/schema.py` at build time: every group and key a run's config "
           f"has ({len(keys)} keys), with its type, default, allowed values and meaning. Set a key on the "
           "command line (`repro run.steps=100`), in an `exp` file, or through `repro.run(**{\"run.steps\": 100})`; "
           "`repro --cfg job` prints the composed values. A bad value is refused before anything runs "
           "(exit 2, naming the key).", ""]
    by_group: dict[str, list] = {}
    for g, cls, f in keys:
        by_group.setdefault(g, []).append((cls, f))
    for g, fields in by_group.items():
        cls = fields[0][0]
        out += [f"## `{g}`", ""]
        doc = (cls.__doc__ or "").strip()
        if doc and not doc.startswith(cls.__name__ + "("):  # dataclass's generated signature is no meaning
            out += [" ".join(doc.split()), ""]
        if g in groups:
            options, default = groups[g]
            prefix = "+" if default is None else ""
            out += ["Options (files in `conf/" + g + "/`): " + ", ".join(
                f"`{prefix}{g}={o}`" + (" (default)" if o == default else "") for o in options), ""]
        if g == "model":
            out += ["Besides these, each model has its dimensions (`model.width`, `model.depth`, ...), "
                    "None meaning \"the preset's\": `repro models` lists every model, preset and size.", ""]
        out += ["| key | type | default | allowed | meaning |", "|---|---|---|---|---|"]
        for cls, f in fields:
            typ = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
            out.append(f"| `{g}.{f.name}` | `{_cell(typ)}` | {_cell(_shown(_default(f)))} | {_cell(_allowed(f))} "
                       f"| {_cell(meaning(cls, f, comments))} |")
        out.append("")
    return "\n".join(out), len(keys)


# ---- commands -----------------------------------------------------------------------------------

def parser() -> argparse.ArgumentParser:
    """repro's command parser, for sphinx-argparse (`:func: parser`): the same one `repro` runs."""
    os.environ["COLUMNS"] = HELP_WIDTH
    from repro import cli

    return cli.build_parser()[0]


def unexplained_options(parser: argparse.ArgumentParser, words: str = "repro") -> list[str]:
    """Every command option or argument without a help line (the reference would show it bare)."""
    missing = []
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, child in a.choices.items():
                missing += unexplained_options(child, f"{words} {name}")
        elif not isinstance(a, argparse._HelpAction) and not a.help:  # SUPPRESS: hidden on purpose
            missing.append(f"{words} {', '.join(a.option_strings) or a.dest}")
    return missing


def cli_page() -> str:
    """The command reference: `repro --help`, then every command from the parsers (sphinx-argparse)."""
    from repro import cli

    os.environ["COLUMNS"] = HELP_WIDTH
    if missing := unexplained_options(parser()):
        raise MissingMeaning(f"command option(s) without a help line: {', '.join(missing)}")
    parser_, sub = cli.build_parser()
    pages = "\n".join(f"| `repro {name}` | {_cell(text)} | [{cli.DOCS[name]}]({os.path.relpath(cli.DOCS[name], 'docs/reference')}) |"
                      for name, text in cli._descriptions(sub).items() if name in cli.DOCS)
    return "\n".join([
        "# Command reference", "",
        "Generated at build time from the argparse parsers (`src/repro/cli.py` builds them): what "
        "`repro COMMAND --help` prints, each ending with the page that explains the command.", "",
        "## `repro`", "", "```text", cli.help_text(), "```", "",
        "| command | what it does | explained in |", "|---|---|---|", pages, "",
        "## Every command and option", "",
        "```{argparse}", ":module: reference", ":func: parser", ":prog: repro", "```", ""])


# ---- ledger -------------------------------------------------------------------------------------

def _type(prop: dict) -> str:
    kinds = prop.get("type", "any")
    kinds = [kinds] if isinstance(kinds, str) else kinds
    item = prop.get("items", {}).get("type")
    kind = " or ".join(f"array of {item}" if k == "array" and item else k for k in kinds)
    return kind + (f" `{prop['pattern']}`" if "pattern" in prop else "")


def ledger_page() -> str:
    from repro.ledger import schema

    props, required = schema.SCHEMA["properties"], set(schema.SCHEMA["required"])
    missing = [k for k, p in props.items() if not p.get("description")] + \
        [s for s, text in schema.STATUSES.items() if not text]
    if missing:
        raise MissingMeaning(f"ledger field(s) or status(es) without a description in {schema.__file__}: "
                             f"{', '.join(missing)}")
    out = ["# Ledger record reference", "",
           f"Generated from `src/repro/ledger/schema.py` (schema version {schema.SCHEMA_VERSION}) at build time. "
           + schema.SCHEMA["description"] + " `repro ledger schema` prints the JSON Schema below; "
           "`repro ledger verify` checks every record against it. Keys not named here may appear "
           "(the schema leaves records open); a new key needs no new version, a changed meaning does.", "",
           "## Fields", "", "| field | type | required | meaning |", "|---|---|---|---|"]
    for key, prop in props.items():
        out.append(f"| `{key}` | {_cell(_type(prop))} | {'yes' if key in required else ''} | {_cell(prop['description'])} |")
    out += ["", "## Statuses", "",
            "A record's `status`; a run's state is its newest record's (`repro ledger list` shows it).", "",
            "| status | meaning |", "|---|---|"]
    out += [f"| `{s}` | {_cell(text)} |" for s, text in schema.STATUSES.items()]
    out += ["", "## The JSON Schema", "", "```json", json.dumps(schema.SCHEMA, indent=2), "```", ""]
    return "\n".join(out)


# ---- the Sphinx extension ----------------------------------------------------------------------

GENERATED = {"reference/config": lambda: config_page()[0], "reference/cli": cli_page, "reference/ledger": ledger_page}


def pages() -> dict[str, str]:
    return {f"{doc}.md": make() for doc, make in GENERATED.items()}


def _fill(app, docname: str, source: list[str]) -> None:
    if docname in GENERATED:
        from sphinx.errors import ExtensionError

        try:
            source[0] = GENERATED[docname]()
        except MissingMeaning as e:
            raise ExtensionError(f"the generated reference: {e}") from None


def setup(app):
    app.connect("source-read", _fill)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "site-reference")
    for path, text in pages().items():
        (target / path).parent.mkdir(parents=True, exist_ok=True)
        (target / path).write_text(text)
        print(target / path)
