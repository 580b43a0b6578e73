"""The plan's 'Exposed communication is 1.662 s of the 13.645 s step (12.2%); pipeline bubble 0.209 s (1.5%), compute
11.747 s.' (default tune, DeepSeek-V3 on 256 GB300) left out the optimizer step (0.027 s): its parts summed to 13.618 s,
not the step. Every term the step model adds is now said, so the line sums to the step."""

from __future__ import annotations

import json
import re

from typer.testing import CliRunner

from commbench.cli.app import app


def test_the_step_line_names_every_term_of_the_step():
    result = CliRunner().invoke(app, ["plan", "--model", "deepseek-v3", "--system", "gb300-nvl72", "--gpus", "256",
                                      "--emit", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    line = next(x for x in doc["explanation"] if x.startswith("Exposed communication is"))
    step = float(re.search(r"of the ([0-9.]+) s step", line).group(1))
    parts = [float(v) for v in re.findall(r"([0-9.]+) s(?: \(|,|\.$)", line.split(" step ", 1)[1])]
    parts.append(float(re.match(r"Exposed communication is ([0-9.]+) s", line).group(1)))
    assert "optimizer" in line and abs(sum(parts) - step) < 0.003, (line, parts)
