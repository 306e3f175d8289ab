"""Plain-Python domain: status machine, constants, value objects and errors. No I/O."""
