"""Stand-ins shared by the tests and the benchmarks, never shipped: a TCP relay that fails the
way a network peer fails, the web app and a daemon's process group started as deployed, the
claim race from separate processes, and moto whose SQS receive costs the same at any queue
depth. (Fakes of the seams used only by the tests live in ``tests/support``.)"""
