"""Text from outside systems (an API server, Prometheus, a credential plugin, a file) on its
way to a terminal or a shell: shown, never obeyed. One rule for every table, message and
completion."""

from __future__ import annotations

import re


def printable(text: str) -> str:
    """TEXT with every character a terminal would act on shown as a Python escape (\\x1b,
    \\n, \\u202e): control characters, escape sequences, and the invisible and bidi format
    characters (zero-width space, right-to-left override) that make text read as what it
    is not. Everything else, accents and CJK included, stays as it is."""
    if text.isprintable():
        return text
    return "".join(
        c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text
    )


def completion_safe(value: str) -> bool:
    """Whether VALUE may be offered to a shell as a completion: printable and without
    whitespace (the shells' completion protocols are lines of words; a newline or a control
    character in a value would inject candidates of its own or drive the terminal)."""
    return bool(value) and value.isprintable() and not any(c.isspace() for c in value)


# A credential plugin's output, or an error that quotes it: the token of an ExecCredential
# (or any JSON "token"/"clientKeyData" member), an Authorization header's value, a PEM key,
# a JWT, EKS's `k8s-aws-v1.` tokens.
_SECRETS = [
    (
        re.compile(r'(?i)("(?:token|clientKeyData|access_?token|id_?token)"\s*:\s*")[^"]*(")'),
        r"\1***\2",
    ),
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+"), r"\1 ***"),
    (re.compile(r"(?i)\b(token['\"]?\s*[=:]\s*)[A-Za-z0-9._~+/=-]{8,}"), r"\1***"),
    (
        re.compile(
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)", re.S
        ),
        "*** private key ***",
    ),
    (re.compile(r"\beyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*"), "***"),
    (re.compile(r"\bk8s-aws-v1\.[A-Za-z0-9_-]+"), "k8s-aws-v1.***"),
]


def redact_secrets(text: str) -> str:
    """TEXT with the credentials a credential plugin or an auth error may carry masked."""
    for pattern, replacement in _SECRETS:
        text = pattern.sub(replacement, text)
    return text
