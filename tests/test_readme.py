"""GIVEN the README and the pages in docs/ WHEN each example command runs verbatim in a fresh
temporary folder (no ``../shared`` beside it, as for a user's clone) THEN it exits as the page
says, without a traceback. A new example is run by default; only the kinds listed in ``SKIP``
(the user's own scripts) are not, and the slow ones run with ``-m slow``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
COMMAND = re.compile(r"^(?: {4})?(?:\$ )?(aiprof [a-z][a-z-]*(?: .*)?)$")
SKIP = {
    "python train.py": "runs the user's own training script",
    "python serve.py": "runs the user's own serving script",
    "python train_ddp.py": "runs the user's own DDP script",
    "python train_loop.py": "runs the user's own training script",
}
SLOW = ("aiprof model", "aiprof ceilings", "aiprof try")  # 10 s to 5 min each on a 2-core VM


@dataclass(frozen=True)
class Example:
    page: str
    line: int
    command: str
    error: str | None  # the one stderr line the page shows, for an example of an error


def _examples(page: Path) -> list[Example]:
    lines = page.read_text(encoding="utf-8").splitlines()
    found = []
    in_block = False
    for number, line in enumerate(lines):
        if line.startswith("```"):
            in_block = not in_block
            continue
        indented = line.startswith("    ")
        match = COMMAND.match(line)
        if not match or not (in_block or indented) or (not line.lstrip().startswith("$")
                                                       and in_block):
            continue
        command = match.group(1)
        follow = number
        while command.endswith("\\"):
            follow += 1
            command = command[:-1] + " " + lines[follow].strip()
        command = re.split(r"\s{2,}\(", command)[0].strip()  # "(2-core VM, date)" notes
        after = lines[follow + 1].strip() if follow + 1 < len(lines) else ""
        error = after if re.match(r"aiprof [a-z-]+: error:", after) else None
        found.append(Example(page.name, number + 1, command, error))
    return found


EXAMPLES = [e for page in PAGES for e in _examples(page)]


def _param(example: Example) -> object:
    marks = [pytest.mark.slow] if any(s in example.command for s in SLOW) else []
    skip = next((why for key, why in SKIP.items() if key in example.command), None)
    if skip:
        marks.append(pytest.mark.skip(reason=skip))
    return pytest.param(example, id=f"{example.page}:{example.line}", marks=marks)


def _doc_file(name: str, marker: str) -> str:
    """The code block of the docs that defines ``name`` (found by a line it contains)."""
    for page in PAGES:
        for block in re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S):
            if marker in block:
                return block
    raise AssertionError(f"no code block in the docs defines {name}")


@pytest.fixture()
def fresh_folder(tmp_path: Path) -> Path:
    """A folder like a user's clone root: the repository's tests/ and scripts/ (some examples
    name a model or workload there) and the files the docs define, but nothing beside it."""
    for folder in ("tests", "scripts"):
        (tmp_path / folder).symlink_to(REPO / folder)
    (tmp_path / "gelu_demo.py").write_text(_doc_file("gelu_demo.py", "class GeluChain"))
    return tmp_path


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIPROF_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["COLUMNS"] = "120"
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600,
                          check=False)


def test_the_pages_have_examples() -> None:
    readme = [e for e in EXAMPLES if e.page == "README.md"]
    assert len(readme) >= 8 and len(EXAMPLES) >= 20
    assert not [e for e in EXAMPLES if "../shared" in e.command]


@pytest.mark.parametrize("example", [_param(e) for e in EXAMPLES])
def test_example_runs_as_written(example: Example, fresh_folder: Path) -> None:
    done = _run(["bash", "-c", example.command], fresh_folder)
    assert "Traceback" not in done.stderr, done.stderr
    if example.error is not None:
        assert done.returncode == 2 and done.stderr.strip() == example.error
    else:
        assert done.returncode == 0, done.stderr


def test_readme_python_block_runs(fresh_folder: Path) -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```python\n(.*?)```", text, re.S)
    assert block is not None
    done = _run([sys.executable, "-c", block.group(1)], fresh_folder)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Trace(") and len(done.stdout.splitlines()[0]) < 400


def test_readme_install_commands_are_the_two_at_the_top() -> None:
    """The two commands are run by hand in a fresh clone (minutes of pip); here: that they are
    the ones the README leads with, and that the CPU-build command is given beside them."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    head = text[: text.index("## What it does")]
    assert head.count("python3 -m venv .venv && . .venv/bin/activate && pip install -e") == 2
    assert "aiprof demo" in head and "python -m pytest -q" in head
    assert "--index-url https://download.pytorch.org/whl/cpu" in head
