"""LOCAL ONLY: the one-command development stack (``jlg dev``) and its stand-ins.

Embedded PostgreSQL, an in-process moto server for AWS, and a stand-in for EventBridge
Scheduler's delivery. Production code never imports this package.
"""
