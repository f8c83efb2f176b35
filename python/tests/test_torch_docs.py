"""Every python code block of docs/TORCH.md runs as written."""
import os
import re

import pytest

pytest.importorskip("torch")

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "TORCH.md")


def _blocks():
    with open(DOC) as f:
        return re.findall(r"```python\n(.*?)```", f.read(), re.S)


def test_the_doc_has_its_training_loop_of_at_most_15_lines():
    loop = _blocks()[0].strip().splitlines()
    assert len(loop) <= 17 and any("opt.step()" in line for line in loop)


@pytest.mark.parametrize("index", range(len(_blocks())))
def test_each_block_runs(index):
    exec(compile(_blocks()[index], f"docs/TORCH.md block {index}", "exec"), {})
