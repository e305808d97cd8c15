from allama.cli._main import main

raise SystemExit(main())
