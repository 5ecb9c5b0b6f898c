"""Campaigns: many runs of one scenario over perturbed parameters, into one table.

A campaign file (YAML) says::

    robot: humanoid                # a ready configuration (config/<name>.yaml) or a YAML path
                                   # (wb_sim_batch --robot NAME|FILE: instead of it; --config
                                   # FILE: a parameter file over it, its keys win)
    duration_s: 3.0                # simulated seconds per case
    seed: 0                        # case k gets seed + k (the IMU noise, your controller)
    controller: pd                 # the built-in PD + gravity (gains: the wb_sim_pd_controller
                                   # block of the robot's YAML), or:
    # controller: {callable: "my_pkg.ctrl:make", rate_hz: 200, params: {gain: 3.0}}
    pushes:                        # applied at time_s, in the link's frame, for duration_s
      - {time_s: 1.0, link: pelvis, magnitude: 100.0, direction_deg: 0.0, duration_s: 0.1}
      # or force: [fx, fy, fz] (N), torque: [tx, ty, tz] (N*m)
    set:                           # fixed values, same keys as grid / random
      contact.friction_coefficient: 0.8
    grid:                          # every combination
      pushes.0.magnitude: [50.0, 100.0, 150.0]
      contact.stiffness: [2.0e4, 4.0e4]
    random:                        # seeded draws, for each grid point
      samples: 10
      seed: 1
      params:
        mass_scale.torso: {uniform: [0.8, 1.2]}
        imu.angular_velocity_bias: {normal: [[0, 0, 0], [0.01, 0.01, 0.01]]}
    metrics: [stands, fell, max_tilt_deg]      # default: all built-in metrics
    custom_metrics: {energy: "my_pkg.metrics:energy"}
    record: false                  # per-case recordings (wb_sim.tools.recording, .npz)
    plots: true                    # summary plots (needs matplotlib)
    ab: {contact.model: rigid}     # the A/B switch: each case again with these values (run B);
                                   # columns b.<metric>, ab.divergence_time_s, ab.max_*_difference
    ab_tolerances: {base_m: 0.01, joint_rad: 0.05}   # when the two runs count as apart
    max_cases: 10000               # most cases (grid points x random.samples), checked before
                                   # any is expanded; at most 1000000

Bounds, each checked before work starts: ``max_cases`` cases, ``duration_s`` at most 86400 s
(a day) and a case's kept trajectory at most 2 GiB (``spec.MAX_TRACE_BYTES``: about 45 min of
the humanoid at 1 kHz), a push's ``time_s`` before the end of its case, and the file itself at most a million
values once its YAML aliases are expanded (the bound of every YAML file wb_sim reads).

The keys of ``set``, ``grid`` and ``random`` are

* any simulator parameter (``wb_sim.config.PARAMETERS`` and ``<surface>.<field>``);
* ``mass_scale.<link>`` (> 0): the link's mass and rotational inertia times this factor, and
  ``com_offset.<link>`` ([dx, dy, dz], m): its centre of mass moved in the link's frame (the
  simulator's ``perturbation.*`` parameters, which edit the URDF's ``<inertial>`` before the
  build);
* ``command_delay_steps``: the torques computed at step k are applied at step k + n (the
  simulator's ``joints.command_delay_steps``: until then the first command acts);
  ``sensor_delay_steps``: the controller sees the state of step k - n (the simulator's
  ``sensors.delay_steps``: its ``sensed_state`` / ``sensed_imu()``, the initial ones at first);
* ``pushes.<i>.<field>``: a field of the i-th push (``time_s``, ``link``, ``force``, ``torque``,
  ``magnitude``, ``direction_deg``, ``duration_s``); magnitude and direction give a horizontal
  force in the link's frame, ``magnitude * [cos(dir), sin(dir), 0]``;
* ``controller.<name>``: a keyword argument of the controller (``kp``, ``kd`` for the PD).

IMU bias, the delays and the mass / CoM changes are all the simulator's own parameters
(``imu.*_bias``, ``joints.command_delay_steps``, ``sensors.delay_steps``, ``perturbation.*``):
the shorthand keys above only name them per link, and any simulator (the ROS node's too) takes
them.

A controller ``module:callable`` is a factory ``make(sim, case, **params)`` returning a callable
``ctrl(obs) -> torques`` (nj,), called every step, or every ``round(1 / (rate_hz dt))`` steps with
the torques held in between (``rate_hz`` 0: every step). ``obs`` is an :class:`Observation`
(t, q, v, joint positions and velocities, the IMU reading or None; a factory that sets
``wants_imu = False`` or ``wants_velocity = False`` on itself gets None for the IMU reading or
``v``), ``case`` a :class:`CaseInfo`.
The modules named must be importable where the cases run (the local pool's workers inherit
``sys.path``; on a Ray cluster, install them on every node). A custom metric
``module:callable`` is called as ``fn(sim, trace)`` after the run and returns a
number or a dict of numbers (columns ``<name>`` or ``<name>.<key>``); ``trace`` holds ``t``
(n+1,), ``q`` (n+1, nq) and ``applied_torques`` (n, nj) of the run.

Every case is a pure function of its parameters, so the table is the same, bit for bit, whatever
the backend (a local process pool, or Ray) and the number of workers. Results are cached in the
output directory by a hash of (wb_sim version, the campaign's fixed parts, the case's parameters
and seed): a campaign run again, or after an interruption, only runs the missing cases.

The package, one job per module: :mod:`.spec` reads and validates a campaign file and expands
its cases; :mod:`.case` runs one case (its simulator, controller, pushes, metrics);
:mod:`.backends` runs cases in this process, on a local process pool or on Ray; :mod:`.run`
is :func:`run_campaign` (the cache, a backend, the table); :mod:`.report` writes the table
and the plots; :mod:`.cli` is ``wb_sim_batch`` (also ``python -m wb_sim.tools.campaign``).
"""

from ...control import CaseInfo, ControllerLoop, Observation, import_callable
from .backends import BACKENDS, local_pool, ray_cluster, serial
from .case import METRICS, case_config, run_case
from .cli import main
from .report import CampaignResult, columns, plot_campaign, write_table
from .run import run_campaign
from .spec import PUSH_FIELDS, SPECIAL_KEYS, TOP_KEYS, Campaign, load_campaign

__all__ = [
    # the controller interface a campaign's controller is written against (wb_sim.control)
    "CaseInfo", "ControllerLoop", "Observation", "import_callable",
    "BACKENDS", "local_pool", "ray_cluster", "serial",
    "METRICS", "case_config", "run_case",
    "main",
    "CampaignResult", "columns", "plot_campaign", "write_table",
    "run_campaign",
    "PUSH_FIELDS", "SPECIAL_KEYS", "TOP_KEYS", "Campaign", "load_campaign",
]
