from kiwb.cli import main

raise SystemExit(main())
