"""Stand-ins shared by the tests and the benchmarks, never shipped: the online-session service
on a real local HTTP server, and the claim race from separate processes. (Fakes of the seams
used only by the tests live in ``tests/support``.)"""
