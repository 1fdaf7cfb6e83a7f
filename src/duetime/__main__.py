"""``python -m duetime`` is the ``duetime`` command."""

from duetime.cli import main

main()
