"""The run-cost baseline: a one-op job that does nothing, same executor as the real one."""

from dagster import Definitions, in_process_executor, job, op


@op
def nothing() -> None:
    """Does no work: what is left is Dagster's own cost of a run."""


@job(executor_def=in_process_executor)
def empty_job() -> None:
    nothing()


defs = Definitions(jobs=[empty_job])
