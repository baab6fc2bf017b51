"""``python -m aiprof``: the ``aiprof`` command, where the console script is not on the PATH."""

from aiprof.cli.main import entry

if __name__ == "__main__":
    entry()
