"""`ray status` parsing against real Ray 2.60 output, and the serve script run in the head."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from spark_tui.core.ray_status import parse_ray_status
from spark_tui.ops.ray import SERVE_EXIT_MARK, serve_script

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GIB = 2**30


def test_a_head_alone_is_one_active_node_with_its_resources() -> None:
    st = parse_ray_status((FIXTURES / "ray_status_head_only_2600.txt").read_text())
    assert (st.active, st.pending, st.failures) == (1, 0, ())
    assert st.resources["CPU"] == 2.0
    assert abs(st.resources["memory"] - 13.02 * GIB) < 0.01 * GIB
    assert "GPU" not in st.resources


def test_two_joined_nodes_count_and_add_up() -> None:
    st = parse_ray_status((FIXTURES / "ray_status_two_nodes_2600.txt").read_text())
    assert st.active == 2
    assert st.resources["CPU"] == 4.0


def test_unparsable_output_is_no_node() -> None:
    st = parse_ray_status("ConnectionError: could not connect to the GCS at 10.0.0.1:46379\n")
    assert st.active == 0 and st.resources == {}


def test_serve_script_quotes_every_argument_and_marks_the_exit() -> None:
    evil = "x'; touch /tmp/pwned; echo '"
    script = serve_script(["vllm", "serve", "m", "--chat-template", evil])
    # The script parses as one command list and the evil value stays one word.
    words = shlex.split(script.split(" >/proc/1/fd/1")[0])
    assert words == ["vllm", "serve", "m", "--chat-template", evil]
    assert SERVE_EXIT_MARK in script and script.endswith("kill -TERM 1")
    assert subprocess.run(["sh", "-n", "-c", script], check=False).returncode == 0


def test_a_ray_head_names_its_api_port_in_a_label_not_in_its_argv() -> None:
    from spark_tui.core.plan import API_PORT_LABEL
    from spark_tui.ops.attach import api_port_of

    argv = ["ray", "start", "--head", "--port", "46379", "--block"]
    assert api_port_of(argv, {API_PORT_LABEL: "8011"}) == 8011
    assert api_port_of(["vllm", "serve", "m", "--port", "8002"]) == 8002


def test_listening_ports_are_read_from_proc_net_tcp() -> None:
    from spark_tui.core.ray_status import listening_ports

    text = (
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid\n"
        "   0: 00000000:B52B 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0\n"
        "   1: 0B004D0A:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0\n"
        "   2: 0B004D0A:B52B 0C004D0A:9C40 01 00000000:00000000 00:00000000 00000000     0\n"
    )
    assert listening_ports(text) == {46379, 8000}
