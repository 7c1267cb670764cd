"""Plans: generators that yield ``steps``, receive their answers and return a store operation's result, with no I/O.
The drivers (``run_sync`` / ``run_async``) pump them, so each operation is written once for ``MongoStore`` and
``AsyncMongoStore``. The package holds its modules' public names: ``from mongostore.core.plan import batch_plan``.
"""

from mongostore.core.plan.batch import *  # noqa: F403
from mongostore.core.plan.context import *  # noqa: F403
from mongostore.core.plan.paths import *  # noqa: F403
from mongostore.core.plan.probe import *  # noqa: F403
from mongostore.core.plan.purge import *  # noqa: F403
from mongostore.core.plan.setup import *  # noqa: F403
from mongostore.core.plan.status import *  # noqa: F403
from mongostore.core.plan.validate import *  # noqa: F403
