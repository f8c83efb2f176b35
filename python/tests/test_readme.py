"""The Python in README.md and docs/PYTHON.md works as written: every python
block runs (in order, each document's blocks in one namespace, as a reader
would paste them) and prints what the text after it says ("The last lines
print `...`"), and the one-liner of each document prints what the text says
(run with this interpreter and library rather than a venv's)."""
import contextlib
import io
import os
import re
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
DOCS = ["README.md", "docs/PYTHON.md"]


def text_of(doc):
    return open(os.path.join(ROOT, doc), encoding="utf-8").read()


def blocks(text, language):
    """(code, the paragraph after it) for each fenced block of the language."""
    return [(m.group(1), m.group(2))
            for m in re.finditer(r"```" + language + r"\n(.*?)```\n\n?(.*?)(?:\n\n|$)", text, re.S)]


@pytest.mark.parametrize("doc", DOCS)
def test_every_python_block_runs_and_prints_what_the_text_says(doc):
    namespace = {}
    found = blocks(text_of(doc), "python")
    if doc == "docs/PYTHON.md":
        assert len(found) >= 2
    for index, (code, after) in enumerate(found):
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(code, f"{doc} (python block {index + 1})", "exec"), namespace)
        said = re.search(r"The last lines print `([^`]*)`", after.replace("\n", " "))
        if said:
            assert printed.getvalue().strip() == said.group(1)


@pytest.mark.parametrize("doc", DOCS)
def test_the_one_liner_prints_what_the_text_says(doc):
    text = text_of(doc)
    line = next(l for code, _ in blocks(text, "sh") for l in code.splitlines() if " -c " in l)
    code = re.search(r'-c "(.*)"$', line).group(1)
    said = re.search(r"which prints `([^`]*)`", text).group(1)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ)
    assert result.returncode == 0, result.stderr
    printed = np.array(result.stdout.strip().strip("[]").split(), dtype=np.float32)
    expected = np.array(said.strip("[]").split(), dtype=np.float32)
    exact = np.float32(1 / (1 + np.exp(-1.0)))
    ulp = np.spacing(exact)
    assert printed.shape == expected.shape == (3,)
    assert np.all(np.abs(printed - exact) <= ulp) and np.all(np.abs(expected - exact) <= ulp), (printed, expected)
