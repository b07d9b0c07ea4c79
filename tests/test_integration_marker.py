"""The fast half (`-m "not integration"`) starts no stand-in, and cannot start to silently."""

import socket
import subprocess

from tests.standins.integration import refused


def test_a_fast_test_cannot_start_a_process():
    with refused():
        subprocess.run(["true"], timeout=10)


def test_a_fast_test_cannot_open_a_server_port():
    with socket.socket() as s, refused():
        s.bind(("127.0.0.1", 0))


def test_a_fast_test_cannot_set_up_a_stand_in(request):
    with refused():
        request.getfixturevalue("kube")
