"""The one sanitizer for outside text, and the redaction of credentials."""

import pytest

from gpuctl.common.text import completion_safe, printable, redact_secrets


@pytest.mark.parametrize(
    "raw, shown",
    [
        ("gpu-1", "gpu-1"),
        ("Müller 東京", "Müller 東京"),
        ("a\x1b[31mb", "a\\x1b[31mb"),
        ("x\x1b]0;title\x07", "x\\x1b]0;title\\x07"),
        ("line\nfake", "line\\nfake"),
        ("\u202egnp.exe", "\\u202egnp.exe"),
        ("zero\u200bwidth", "zero\\u200bwidth"),
        ("c1\x9bcsi", "c1\\x9bcsi"),
    ],
)
def test_printable_shows_what_a_terminal_would_act_on(raw, shown):
    assert printable(raw) == shown
    assert printable(shown) == shown  # once is enough


@pytest.mark.parametrize("value, ok", [("team-a", True), ("a b", False), ("a\nb", False),
                                       ("\x1b[0m", False), ("", False), ("1g.10gb=", True)])  # fmt: skip
def test_completion_offers_only_what_the_shell_protocol_carries(value, ok):
    assert completion_safe(value) is ok


@pytest.mark.parametrize(
    "text, secret",
    [
        ('{"kind":"ExecCredential","status":{"token":"abc.def-123"}}', "abc.def-123"),
        ("Authorization: Bearer eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln", "eyJhbGci"),
        ("token=0123456789abcdef", "0123456789abcdef"),
        ("k8s-aws-v1.aHR0cHM6Ly9zdHMuYW1hem9uYXdz", "aHR0cHM6"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----", "MIIE"),
    ],
)
def test_credentials_are_masked(text, secret):
    assert secret not in redact_secrets(text)


def test_ordinary_text_is_left_alone():
    text = "the token of this attempt is checked; 3 GPUs free"
    assert redact_secrets(text) == text
