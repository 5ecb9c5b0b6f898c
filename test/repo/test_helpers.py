"""The test helpers' own rules that decide a test's verdict."""

import signal
import subprocess

from helpers.ros import cli_answered

RESPONSE = ("waiting for service to become available...\nrequester: making request: "
            "std_srvs.srv.SetBool_Request(data=False)\n\nresponse:\n"
            "std_srvs.srv.SetBool_Response(success=True, message='running')\n\n")


def _run(rc: int, stdout: str) -> subprocess.CompletedProcess:
    return subprocess.CompletedProcess(["ros2"], rc, stdout, "")


def test_a_service_call_counts_only_when_it_exited_0_or_crashed_after_the_whole_response():
    assert cli_answered(_run(0, RESPONSE))
    assert cli_answered(_run(-signal.SIGSEGV, RESPONSE))  # CI: the CLI dies while exiting
    requested = RESPONSE.partition("response:")[0]
    assert not cli_answered(_run(-signal.SIGSEGV, requested))  # died before the answer
    assert not cli_answered(_run(-signal.SIGABRT, RESPONSE))
    assert not cli_answered(_run(1, RESPONSE))
