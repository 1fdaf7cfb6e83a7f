"""mkdocs hooks (mkdocs.yml ``hooks:``): the reference pages made from the code at build time.

- ``decisions/index.md``: the decision records, listed by number.
- ``reference/cli.md``: ``duetime --help`` and ``duetime … COMMAND --help`` for every command,
  as the command prints it (run in-process, 100 columns, no colour).
- ``reference/rest-api.md`` and ``reference/openapi.json``: the OpenAPI document the REST API
  serves at ``/api/v1/openapi.json``, and a page of its operations and schemas.

Nothing is written to the source tree: the pages exist only in the built site.

A link from a page to a file outside ``docs/`` (``../bench/README.md``, ``../src/…``) has no
page to point at in the site; it becomes the file's repository path in code
(:func:`on_page_markdown`), so pages read the same on GitHub and in the site."""

from __future__ import annotations

import json
import os
import posixpath
import re
from collections.abc import Iterator
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

CLI_PAGE = "reference/cli.md"
DECISIONS_PAGE = "decisions/index.md"
REST_PAGE = "reference/rest-api.md"
OPENAPI_FILE = "reference/openapi.json"
WIDTH = 100


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for path, content in (
        (DECISIONS_PAGE, decisions_index(files)),
        (CLI_PAGE, cli_reference()),
        (REST_PAGE, rest_reference(openapi_document())),
        (OPENAPI_FILE, json.dumps(openapi_document(), indent=2)),
    ):
        existing = files.get_file_from_path(path)
        if existing is not None:
            files.remove(existing)
        files.append(File.generated(config, path, content=content))
    return files


LINK = re.compile(r"(?<!!)\[([^\]]+)\]\(([^)\s#]+)(#[^)\s]*)?\)")


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """``[text](../outside/docs.md)`` → ``text (`outside/docs.md`)``."""
    here = posixpath.dirname(page.file.src_uri)

    def repoint(match: re.Match[str]) -> str:
        text, target = match.group(1), match.group(2)
        if "://" in target or target.startswith(("/", "mailto:")):
            return match.group(0)
        resolved = posixpath.normpath(posixpath.join("docs", here, target))
        if resolved.startswith("docs/"):
            return match.group(0)
        shown = f"`{resolved}`"
        return shown if text.strip("`") == resolved else f"{text} ({shown})"

    return LINK.sub(repoint, markdown)


def decisions_index(files: Files) -> str:
    """A page listing the decision records (``docs/decisions/NNNN-*.md``) by number."""
    lines = [
        "# Decision records\n",
        "Why the code is the way it is: one page per decision, with its context and "
        "consequences.\n",
    ]
    for file in sorted(files.documentation_pages(), key=lambda f: f.src_uri):
        name = file.src_uri.removeprefix("decisions/")
        if name == file.src_uri or "/" in name or name == "index.md":
            continue
        text = file.content_string
        title = next((ln[2:] for ln in text.splitlines() if ln.startswith("# ")), name)
        lines.append(f"- [{title.strip()}]({name})")
    return "\n".join(lines) + "\n"


# --- the CLI -------------------------------------------------------------------------------


def _commands(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every command path under ``group`` (a click group, of the click typer vendors),
    depth first, in the order ``--help`` lists them."""
    yield path
    if hasattr(group, "list_commands"):
        ctx = group.context_class(group)
        for name in group.list_commands(ctx):
            sub = group.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                yield from _commands(sub, (*path, name))


def cli_reference() -> str:
    import typer
    from typer.testing import CliRunner

    from duetime.cli import cli

    runner = CliRunner()
    env = {"COLUMNS": str(WIDTH), "NO_COLOR": "1", "TERM": "dumb", "TTY_COMPATIBLE": "0"}
    saved = {k: os.environ.get(k) for k in env}
    parts = [
        "# CLI reference\n",
        "Generated from the commands' own `--help` when this site is built "
        "(`scripts/docs_hooks.py`); [CLI conventions](../cli.md) explains the options every "
        "command shares.\n",
    ]
    try:
        for path in _commands(typer.main.get_command(cli)):
            result = runner.invoke(cli, [*path, "--help"], env=env, terminal_width=WIDTH)
            if result.exit_code != 0:
                raise RuntimeError(f"duetime {' '.join(path)} --help failed: {result.output}")
            title = " ".join(("duetime", *path))
            level = "##" if len(path) <= 1 else "###"
            parts.append(f"{level} `{title}`\n\n```text\n{result.stdout.rstrip()}\n```\n")
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return "\n".join(parts)


# --- the REST API --------------------------------------------------------------------------


def openapi_document() -> dict[str, Any]:
    from duetime.api import create_api
    from duetime.app import AsyncApp

    # building the routes opens nothing: the app is never connected
    document: dict[str, Any] = create_api(AsyncApp(":memory:"), auth_required=True).openapi()
    return document


def _cell(text: Any) -> str:
    return " ".join(str(text or "").split()).replace("|", "\\|")


def _schema_name(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " or ".join(_schema_name(s) for s in schema[key])
    if schema.get("type") == "array":
        return f"array of {_schema_name(schema.get('items', {}))}"
    return str(schema.get("type", "any"))


def _response_body(response: dict[str, Any]) -> str:
    content = response.get("content", {})
    return ", ".join(
        f"{_schema_name(c.get('schema', {}))} (`{media}`)" for media, c in content.items()
    )


def rest_reference(document: dict[str, Any]) -> str:
    info = document["info"]
    out = [
        "# REST API reference\n",
        f"{info['title']} {info['version']}, generated from the OpenAPI document the server "
        "serves at `/api/v1/openapi.json` ([download it](openapi.json)) when this site is "
        "built. The [REST API guide](../api.md) explains auth, errors, rate limits and "
        "idempotency.\n",
    ]
    by_tag: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, operations in document["paths"].items():
        for method, op in operations.items():
            if method.startswith("x-") or not isinstance(op, dict):
                continue
            tag = (op.get("tags") or ["other"])[0]
            by_tag.setdefault(tag, []).append((method.upper(), path, op))
    descriptions = {t["name"]: t.get("description", "") for t in document.get("tags", [])}
    for tag, operations in by_tag.items():
        out.append(f"## {tag}\n\n{descriptions.get(tag, '')}\n")
        for method, path, op in operations:
            out.append(f"### `{method} {path}`\n\n**{_cell(op.get('summary'))}**\n")
            if op.get("description"):
                out.append(f"{op['description'].strip()}\n")
            params = op.get("parameters", [])
            if params:
                out.append(
                    "| parameter | in | required | type | description |\n|---|---|---|---|---|"
                )
                out += [
                    f"| `{p['name']}` | {p['in']} | {'yes' if p.get('required') else 'no'} | "
                    f"{_schema_name(p.get('schema', {}))} | {_cell(p.get('description'))} |"
                    for p in params
                ]
                out.append("")
            body = op.get("requestBody", {}).get("content", {})
            for media, content in body.items():
                out.append(f"Body (`{media}`): {_schema_name(content.get('schema', {}))}\n")
            responses = op.get("responses", {})
            out.append("| status | meaning | body |\n|---|---|---|")
            out += [
                f"| {code} | {_cell(r.get('description'))} | {_response_body(r)} |"
                for code, r in responses.items()
            ]
            out.append("")
    schemas = document.get("components", {}).get("schemas", {})
    if schemas:
        out.append("## Schemas\n")
    for name, schema in schemas.items():
        out.append(f"### {name}\n")
        if schema.get("description"):
            out.append(f"{_cell(schema['description'])}\n")
        props = schema.get("properties", {})
        required = set(schema.get("required", []))
        if props:
            out.append("| field | type | required | description |\n|---|---|---|---|")
            out += [
                f"| `{field}` | {_schema_name(p)} | {'yes' if field in required else 'no'} | "
                f"{_cell(p.get('description'))} |"
                for field, p in props.items()
            ]
            out.append("")
        elif "enum" in schema:
            out.append(", ".join(f"`{v}`" for v in schema["enum"]) + "\n")
    return "\n".join(out)
