"""Services: the one generation gate and its lease, the fallback sweep and backfill, set/clear
with its schedule change, EventBridge schedule sync, and the queue consumer's intake."""
