from kiwb.cli import main
from kiwb.workers.collectives import exit_process

exit_process(main())
