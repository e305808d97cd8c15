"""`python -m allama`: the `allama` command, as `python -m allama.cli` runs it (only run by
`-m`: `import allama` does not load it)."""

from allama.cli import main

raise SystemExit(main())
