"""The CLI entry point: help, unknown commands, one-line usage errors."""

from __future__ import annotations

import subprocess
import sys

from aiprof.cli.main import main


def test_no_command_prints_help_and_exits_2(capsys):
    assert main([]) == 2
    assert "COMMAND" in capsys.readouterr().out


def test_unknown_command_is_one_line_exit_2(capsys):
    code = main(["no-such-command"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "invalid choice" in err


def test_console_script_runs():
    done = subprocess.run([sys.executable, "-m", "aiprof.cli.main", "--version"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0 and done.stdout.startswith("aiprof")


def test_python_dash_m_aiprof_is_the_command() -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "aiprof", "--version"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("aiprof")
