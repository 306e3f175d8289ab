"""What a leaked credential looks like, for scanning the tree and the logs tests write."""

import re

PATTERNS = {
    "JWT": re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    "AWS access key": re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b"),
    "private key": re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    "bearer token": re.compile(r"Bearer [A-Za-z0-9_.-]{30,}"),
}


def find_secrets(text: str) -> list[str]:
    return [name for name, pattern in PATTERNS.items() if pattern.search(text)]
