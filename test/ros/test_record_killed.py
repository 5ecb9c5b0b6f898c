"""A recorder killed mid-recording (SIGKILL: no close, no metadata.yaml, an MCAP file
without its end; issue 27, round 3): the bag is read up to its last chunk (wb_sim_record
writes one every second), with a warning, and ``wb_sim_plot`` plots it. Before, the whole
bag was lost."""

from __future__ import annotations

import sys
import time

import pytest

from helpers.extras import require_modules, require_ros

require_ros("sensor_msgs.msg", "geometry_msgs.msg", "nav_msgs.msg", "std_msgs.msg",
            "rosbags")
require_modules("matplotlib", why="wb_sim_plot draws with matplotlib")

from helpers.ros import Proc, fresh_domain_id, pd_controller_argv, sim_node_argv  # noqa: E402
from wb_sim.tools.bag import history_from_bag  # noqa: E402
from wb_sim.tools.plot import main as plot_main  # noqa: E402

STARTUP_TIMEOUT = 30.0


def test_a_killed_recorder_leaves_a_bag_read_to_its_last_chunk(tmp_path):
    bag = tmp_path / "killed"
    domain = fresh_domain_id()
    procs = []
    try:
        node = Proc("wb_sim", sim_node_argv("sync.mode:=lockstep"), domain, tmp_path)
        procs.append(node)
        rec = Proc("record", [sys.executable, "-m", "wb_sim.ros.record", "-o", str(bag),
                              "--wait", str(STARTUP_TIMEOUT)], domain, tmp_path)
        procs.append(rec)
        assert rec.wait_for_log("recording 15 topics into", STARTUP_TIMEOUT), rec.log()
        ctrl = Proc("controller", pd_controller_argv(), domain, tmp_path)
        procs.append(ctrl)
        assert node.wait_for_log("the simulation starts", STARTUP_TIMEOUT), node.log()
        time.sleep(3.5)  # three chunks or more on disk
        rec.kill()
    finally:
        for p in procs:
            p.close()
    assert not (bag / "metadata.yaml").exists()  # killed: nothing closed the bag
    with pytest.warns(UserWarning, match="was not closed by its recorder"):
        h = history_from_bag(bag)
    assert h.n > 100  # the chunks written before the kill
    out = tmp_path / "plots"
    with pytest.warns(UserWarning, match="was not closed by its recorder"):
        assert plot_main([str(bag), "-o", str(out)]) == 0
    # the five figures, the contact truth's and the solver health's (/diagnostics, ~1 Hz)
    assert sorted(p.name for p in out.glob("*.png")) == sorted([
        "base_com.png", "contact_forces.png", "joint_tracking.png", "torques.png",
        "real_time_factor.png", "contact_state.png", "solver_health.png"])


@pytest.mark.parametrize("where", ["no_such_dir/bag", "a_file/bag"])
def test_a_bad_output_path_is_exit_2_before_connecting(tmp_path, where):
    (tmp_path / "a_file").write_text("")
    import subprocess
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "wb_sim.ros.record", "-o", str(tmp_path / where),
                        "--wait", "60"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert "cannot create" in r.stderr and "Traceback" not in r.stderr
    assert time.monotonic() - t0 < 30  # not after waiting for a simulator node
