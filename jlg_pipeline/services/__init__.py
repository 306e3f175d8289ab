"""Services: the one generation gate, the fallback sweep, and (later) set/clear orchestration."""
