"""The Dagster shell over the core, one module per feature: generation runs, the SQS events,
EventBridge schedule sync, the watchdog, the fallback (sweep and backfill) and pruning; with
the resources, the run requests and tags they share. Op and sensor bodies are a few lines
calling the plain services."""
