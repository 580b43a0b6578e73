"""`tune --results FILE` skips the sweep: its progress line is a finished step, not a spinner still turning
(piped to a file it printed '⠋ 1/3 sweep: skipped, using FILE' to the end, beside the finished fit and plan
steps: rich's add_task(completed=1) leaves a task unfinished until an update marks it)."""

from __future__ import annotations

from rich.progress import Progress
from typer.testing import CliRunner

import commbench.cli.tune as tune_cli
from commbench.cli.app import app
from tests.test_plan_files_guarded import DATA


def test_skipped_sweep_step_is_shown_finished(tmp_path, monkeypatch):
    seen = {}

    class Recording(Progress):
        def stop(self):
            seen.update({task.description: task.finished for task in self.tasks})
            super().stop()

    monkeypatch.setattr(tune_cli, "Progress", Recording)
    result = CliRunner().invoke(app, ["tune", "--results", str(DATA), "--system", "h100-hgx", "--gpus", "16",
                                      "--model", "mixtral-8x7b", "--top", "1", "-O", str(tmp_path / "t")],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    skipped = [d for d in seen if d.startswith("1/3 sweep: skipped")]
    assert skipped and all(seen.values()), seen
