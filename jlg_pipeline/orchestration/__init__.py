"""The Dagster shell over the core: resources, jobs, the SQS sensor and the fallback
schedule. Op and sensor bodies are a few lines calling the plain services."""
