"""moto's server with one cost taken out of SQS's ReceiveMessage, for the benchmarks that
measure intake under a burst.

moto checks each message it hands out against the queue's retention period by computing
*every* queue attribute, three of which scan the whole queue (``ApproximateNumberOf…``): a
receive of 10 costs 30 scans, 0.4 s a call with 2,000 messages in flight, so a cohort's
messages reach the sensor at ~15 a second and the figure measures moto (its own source marks
the queue walk "can become very inefficient"). SQS answers a receive in tens of milliseconds
whatever the queue's depth. Here the check reads the one attribute it needs; what is
delivered, and when a message counts as expired, stay moto's. The remaining walk over the
visible messages (one per call) is kept: ~14 ms a call at 2,000.

    python -m testkit.moto_sqs -H 127.0.0.1 -p 5000    # moto_server's arguments
"""

import sys

from moto.core.utils import unix_time
from moto.server import main as moto_main
from moto.sqs.models import Message, SQSBackend


def within_retention(backend: SQSBackend, queue_name: str, message: Message) -> bool:
    """moto's ``is_message_valid_based_on_retention_period``, reading one attribute."""
    # moto sets each attribute on the queue from its name (``_set_attributes``).
    retention_s = int(backend.get_queue(queue_name).message_retention_period)  # type: ignore[attr-defined]
    return bool(retention_s + (message.sent_timestamp or 0) / 1000 > unix_time())


def install() -> None:
    SQSBackend.is_message_valid_based_on_retention_period = within_retention  # type: ignore[method-assign,assignment]


if __name__ == "__main__":
    install()
    moto_main(sys.argv[1:])
