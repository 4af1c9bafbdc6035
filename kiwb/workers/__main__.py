"""`python -m kiwb.workers PROJECT JOB_ID`: the detached worker process of one recorded job."""

import sys

from kiwb.workers.runner import main

sys.exit(main())
