"""The README's Python section works as written: its python example runs and
prints what the text after it says, and its one-liner prints what the text
says (run with this interpreter and library rather than a venv's)."""
import contextlib
import io
import os
import re
import subprocess
import sys

import numpy as np

README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")


def python_section():
    text = open(README, encoding="utf-8").read()
    start = text.index("\n## Python\n")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def fenced(section, language):
    return re.findall(r"```" + language + r"\n(.*?)```", section, re.S)


def test_the_python_example_runs_and_prints_what_the_readme_says():
    section = python_section()
    code = fenced(section, "python")[0]
    said = re.search(r"The last lines print `([^`]*)`", section.replace("\n", " ")).group(1)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "README.md (Python)", "exec"), {})
    assert printed.getvalue().strip() == said


def test_the_one_liner_prints_what_the_readme_says():
    section = python_section()
    line = next(l for l in fenced(section, "sh")[0].splitlines() if " -c " in l)
    code = re.search(r'-c "(.*)"$', line).group(1)
    said = re.search(r"which prints `([^`]*)`", section).group(1)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ)
    assert result.returncode == 0, result.stderr
    printed = np.array(result.stdout.strip().strip("[]").split(), dtype=np.float32)
    expected = np.array(said.strip("[]").split(), dtype=np.float32)
    exact = np.float32(1 / (1 + np.exp(-1.0)))
    ulp = np.spacing(exact)
    assert printed.shape == expected.shape == (3,)
    assert np.all(np.abs(printed - exact) <= ulp) and np.all(np.abs(expected - exact) <= ulp), (printed, expected)
