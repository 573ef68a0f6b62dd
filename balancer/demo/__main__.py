import sys

from balancer.demo.run import main

sys.exit(main())
