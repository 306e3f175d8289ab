"""Adapters: the database schema and all SQL (repository, schedule outbox, intent history,
metrics snapshot), the registrars, and thin boto3 clients for EventBridge Scheduler and SQS."""
