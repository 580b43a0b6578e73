"""Entry point: importing a command module registers its command on the app."""

from commbench.cli.base import app

# One line per command module; each registers itself with @command.
from commbench.cli import bench as _bench  # noqa: F401,E402
from commbench.cli import env as _env  # noqa: F401,E402
from commbench.cli import fit as _fit  # noqa: F401,E402
from commbench.cli import predict as _predict  # noqa: F401,E402
from commbench.cli import systems as _systems  # noqa: F401,E402
from commbench.cli import plan as _plan  # noqa: F401,E402
from commbench.cli import sweep as _sweep  # noqa: F401,E402
from commbench.cli import compare as _compare  # noqa: F401,E402
from commbench.cli import importer as _importer  # noqa: F401,E402
from commbench.cli import report as _report  # noqa: F401,E402
from commbench.cli import emulate as _emulate  # noqa: F401,E402
from commbench.cli import tune as _tune  # noqa: F401,E402
from commbench.cli import verify_plan as _verify_plan  # noqa: F401,E402
from commbench.cli import calibrate as _calibrate  # noqa: F401,E402
from commbench.cli import nccl_tuner as _nccl_tuner  # noqa: F401,E402


def main() -> None:
    app()
