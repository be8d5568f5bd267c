"""``mgpu skills check``: keep the agent skills and the docs true to the real command line.

What is checked, under a project root:

- every ``skills/<name>/SKILL.md``: YAML front matter (a :data:`NAME` equal to the folder name; a
  third-person ``description`` of at most :data:`MAX_DESCRIPTION` characters saying "Use when";
  ``license``; ``metadata`` with :data:`METADATA`), the :data:`SECTIONS`, a body under
  :data:`MAX_BODY_LINES` lines; beside it a ``reference.md`` and an ``evaluations.md`` with at least
  :data:`MIN_SCENARIOS` scenarios, each with the :data:`SCENARIO_FIELDS`;
- in every Markdown file of ``skills/``, ``docs/`` and the README: relative links and back-quoted
  repository paths must exist, and every quoted ``mgpu …`` command line must parse against the
  real CLI (it is parsed, never run), so a renamed flag fails the test suite;
- one command style in ``skills/``: ``mgpu …``, never ``uv run mgpu …``.

Checks are pure functions of file contents plus a ``parse`` callable: :func:`check_tree` collects
:class:`Problem` records and prints nothing. It imports nothing of the package (PyYAML reads the
front matter); ``mgpu skills check`` hands it :func:`isaaclab_mgpu.cli.validate.parse_command_line`.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

NAME = re.compile(r"^[a-z0-9-]{1,64}$")
SECTIONS = ("When To Use", "Workflow", "Validation", "Maintenance", "References")
METADATA = ("author", "audience", "status", "owners")
MAX_BODY_LINES = 500
MAX_DESCRIPTION = 1024
MIN_SCENARIOS = 4
SCENARIO_FIELDS = ("Query", "Expected behavior", "Known failure modes")
#: Top-level folders whose back-quoted paths must exist.
PATH_ROOTS = ("skills/", "docs/", "isaaclab_mgpu/", "tests/", "benchmarks/", ".ci/")

_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_CODE_SPAN = re.compile(r"`([^`\n]+)`")
_FENCE = re.compile(r"^\s*```")


@dataclass(frozen=True)
class Problem:
    """One thing wrong in one file."""

    path: str
    """File, relative to the checked root."""

    line: int | None
    """1-based line, when the problem has one."""

    message: str
    """What is wrong and how to fix it."""

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.message}"


#: ``parse(argv)`` returns None when ``mgpu argv`` is a valid command line, else the error.
Parser = Callable[[list[str]], "str | None"]


def check_tree(root: Path, parse: Parser) -> list[Problem]:
    """Check every skill and every Markdown file of ``root``; return the problems found."""
    problems: list[Problem] = []
    for skill_md in sorted(root.glob("skills/*/SKILL.md")):
        problems += check_skill(skill_md.parent, root)
    for md in markdown_files(root):
        text = md.read_text()
        rel = str(md.relative_to(root))
        problems += check_links(text, md, root, rel)
        problems += check_commands(text, rel, parse)
        if rel.startswith("skills/"):
            problems += check_command_style(text, rel)
    return problems


def check_command_style(text: str, rel: str) -> list[Problem]:
    """Skills quote command lines as ``mgpu …``; ``uv run mgpu …`` is a second style."""
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        for raw in [line, *_CODE_SPAN.findall(line)]:
            words = raw.strip().removeprefix("$ ").split()
            if words[:3] == ["uv", "run", "mgpu"] and _mgpu_argv(raw) is not None:
                out.append(Problem(rel, number, "write `mgpu …`, not `uv run mgpu …` (one command style)"))
    return out


def markdown_files(root: Path) -> list[Path]:
    """The Markdown files whose links and commands are checked."""
    found = [p for d in ("skills", "docs") for p in sorted((root / d).rglob("*.md"))]
    readme = root / "README.md"
    return [readme, *found] if readme.is_file() else found


def split_front_matter(text: str) -> tuple[str | None, str]:
    """Return (front matter, body)."""
    end = text.find("\n---", 4) if text.startswith("---\n") else -1
    if end < 0:
        return None, text
    return text[4:end], text[text.find("\n", end + 4) + 1 :]


def check_skill(folder: Path, root: Path) -> list[Problem]:
    """Check one skill folder: front matter, sections, length and companion files."""
    import yaml

    rel = str((folder / "SKILL.md").relative_to(root))
    out: list[Problem] = []

    def bad(message: str, line: int | None = None) -> None:
        out.append(Problem(rel, line, message))

    head, body = split_front_matter((folder / "SKILL.md").read_text())
    if head is None:
        bad("no YAML front matter; start the file with --- name/description/... ---")
        return out
    try:
        meta = yaml.safe_load(head) or {}
    except yaml.YAMLError as exc:
        bad(f"front matter is not valid YAML: {exc}".splitlines()[0])
        return out
    if not isinstance(meta, dict):
        bad("front matter must be a mapping of keys to values")
        return out
    name = str(meta.get("name", ""))
    if not NAME.match(name):
        bad(f"name {name!r} must match {NAME.pattern}")
    elif name != folder.name:
        bad(f"name {name!r} differs from its folder {folder.name!r}; make them equal")
    desc = str(meta.get("description", ""))
    if not desc:
        bad("description is missing")
    if len(desc) > MAX_DESCRIPTION:
        bad(f"description has {len(desc)} characters; keep it to {MAX_DESCRIPTION}")
    if "Use when" not in desc:
        bad('description must say when to use the skill ("Use when ...")')
    if re.match(r"^(I|We|You|Use)\b", desc):
        bad("description must be written in the third person (e.g. 'Launches ...')")
    if not meta.get("license"):
        bad("license is missing")
    data = meta.get("metadata")
    fields = data if isinstance(data, dict) else {}
    for key in METADATA:
        if not fields.get(key):
            bad(f"metadata.{key} is missing")
    headings = re.findall(r"^##\s+(.+?)\s*$", body, flags=re.M)
    for section in SECTIONS:
        if section not in headings:
            bad(f"section '## {section}' is missing")
    if body.count("\n") >= MAX_BODY_LINES:
        bad(f"body has {body.count(chr(10))} lines; keep it under {MAX_BODY_LINES}")
    if not (folder / "reference.md").is_file():
        bad("reference.md is missing beside SKILL.md")
    evaluations = folder / "evaluations.md"
    if not evaluations.is_file():
        bad("evaluations.md is missing beside SKILL.md")
    else:
        out += check_evaluations(evaluations.read_text(), str(evaluations.relative_to(root)))
    return out


def check_evaluations(text: str, rel: str) -> list[Problem]:
    """At least MIN_SCENARIOS scenarios, each with every field, one not routing to the skill."""
    parts = re.split(r"^##\s+", text, flags=re.M)[1:]
    out = []
    if len(parts) < MIN_SCENARIOS:
        message = f"{len(parts)} scenarios; write at least {MIN_SCENARIOS} (## headings)"
        out.append(Problem(rel, None, message))
    for part in parts:
        title = part.splitlines()[0]
        for field in SCENARIO_FIELDS:
            if not re.search(rf"^\W*{re.escape(field)}\W", part, flags=re.M | re.I):
                out.append(Problem(rel, None, f"scenario '{title}' lacks '{field}'"))
    if parts and not any(re.search(r"not route|must not|should not", p, flags=re.I) for p in parts):
        out.append(Problem(rel, None, "add a scenario that must NOT route to this skill"))
    return out


def check_links(text: str, md: Path, root: Path, rel: str) -> list[Problem]:
    """Relative links and back-quoted repository paths must exist."""
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        for target in _LINK.findall(line):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            path = (md.parent / target.split("#")[0]).resolve()
            if not path.exists():
                out.append(Problem(rel, number, f"link target {target} does not exist"))
        for span in _CODE_SPAN.findall(line):
            if _is_repo_path(span) and not (root / span.split("#")[0].split("::")[0]).exists():
                out.append(Problem(rel, number, f"path {span} does not exist"))
    return out


def _is_repo_path(span: str) -> bool:
    return span.startswith(PATH_ROOTS) and " " not in span and not any(c in span for c in "*<>{}")


def command_lines(text: str) -> Iterator[tuple[int, list[str]]]:
    """Every quoted ``mgpu`` command line: (line number, argv after ``mgpu``)."""
    in_fence, pending, start = False, "", 0
    for number, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            in_fence, pending = not in_fence, ""
            continue
        candidates = [line] if in_fence else _CODE_SPAN.findall(line)
        for raw in candidates:
            if in_fence and pending:
                raw = pending + " " + raw.strip()
            elif in_fence:
                start = number
            if in_fence and raw.rstrip().endswith("\\"):
                pending = raw.rstrip()[:-1]
                continue
            pending = ""
            argv = _mgpu_argv(raw)
            if argv is not None:
                yield (start if in_fence else number), argv


def _mgpu_argv(raw: str) -> list[str] | None:
    text = raw.strip().removeprefix("$ ").strip()
    try:
        words = shlex.split(text, comments=True)
    except ValueError:
        return None
    while words and (re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]) or words[0] in ("uv", "run")):
        words = words[1:]
    if len(words) < 2 or words[0] != "mgpu":
        return None  # not a command line, or a bare mention of mgpu
    # Placeholders like <N>, [OPTIONS] or ... mark an illustration or a synopsis, not a command line.
    if any(w in ("…", "...") or w.startswith(("<", "[")) for w in words):
        return None
    return words[1:]


def check_commands(text: str, rel: str, parse: Parser) -> list[Problem]:
    """Every quoted ``mgpu`` command line must parse against the real CLI."""
    out = []
    for number, argv in command_lines(text):
        error = parse(argv)
        if error:
            out.append(Problem(rel, number, f"`mgpu {shlex.join(argv)}`: {error}"))
    return out
