"""The docs' measured rows, generated from runs (issue 28: a hand-copied row goes stale when
the physics changes; docs/campaigns.md said 1.13 for a peak torque ratio long after it was 8).

A generated block in a page sits between two markers, each on a line of its own, indented as
the block is (inside a list item)::

    <!-- generated: NAME (tools/docs_rows.py --write NAME) -->
    | ... |
    <!-- end generated: NAME -->

``BLOCKS`` maps each NAME to its page and its generator: a function that makes the runs
(the tests' own scenarios, from the helpers the tests assert with: helpers.spinning,
helpers.friction_box, the campaign's cases) and returns the block's text. Only deterministic
figures are generated, rounded to what the page needs (a few significant digits, so BLAS's
last bits on another machine do not change them); timings stay hand-written.
test/tools/test_docs_rows.py regenerates each block and fails with the difference;
``python tools/docs_rows.py --write [NAME ...]`` writes them into the pages."""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass
from typing import Callable

from helpers import ROOT

MINUS = "\u2212"


def _begin(name: str) -> str:
    return f"<!-- generated: {name} (tools/docs_rows.py --write {name}) -->"


def _end(name: str) -> str:
    return f"<!-- end generated: {name} -->"


def pct(x: float, decimals: int = 2) -> str:
    """A relative deviation as a signed percentage: -0.0016 -> '−0.16 %'."""
    s = f"{x * 100:+.{decimals}f}"
    return s.replace("-", MINUS) + " %"


def _same_or_each(shown: list[str], same: str) -> str:
    """'v <same>' when every entry reads the same, else 'a / b / c'."""
    return f"{shown[0]} {same}" if len(set(shown)) == 1 else " / ".join(shown)


def sci(x: float, digits: int = 2) -> str:
    """A small number in short scientific notation: 7.5e-4, −4e-5."""
    mantissa, exponent = f"{x:.{digits - 1}e}".split("e")
    return f"{mantissa}e{int(exponent)}".replace("-", MINUS, 1 if x < 0 else 0)


# ---------------------------------------------------------------------------
# docs/campaigns.md: the push-recovery excerpt
# ---------------------------------------------------------------------------

CAMPAIGN = ROOT / "examples" / "push_recovery.yaml"
CAMPAIGN_CASES = (1, 25, 28, 31, 37)
CAMPAIGN_KEYS = ["case_id", "pushes.0.magnitude", "pushes.0.direction_deg", "contact.stiffness",
                 "stands", "fell", "max_tilt_deg", "com_deviation_m", "foot_slip_m",
                 "peak_torque_ratio"]


def campaign_excerpt() -> str:
    """Five cases of examples/push_recovery.yaml, as the results table rounds them."""
    from wb_sim.tools.campaign.case import run_case
    from wb_sim.tools.campaign.report import markdown_rows
    from wb_sim.tools.campaign.spec import load_campaign
    campaign = load_campaign(CAMPAIGN)
    rows = []
    for case in campaign.cases:
        if case["index"] in CAMPAIGN_CASES:
            row = run_case({"spec": campaign.spec, "case": case, "out": None})
            assert row["status"] == "ok", row
            rows.append({**case["params"], **row})
    return markdown_rows(rows, CAMPAIGN_KEYS)


# ---------------------------------------------------------------------------
# docs/physics.md: integration of spinning bodies
# ---------------------------------------------------------------------------

def gyroscopic_table() -> str:
    """The "now" column of test/core/test_gyroscopic.py's cases (5 s at 1 kHz; the top also
    at 10 kHz); the "up to fdb5e48" column is that commit's, measured once."""
    from helpers.spinning import TOP_TILT, asymmetric_body, free_wheel, top

    def kept(x: float) -> str:
        return "to rounding" if x < 1e-12 else sci(x)

    w30, w100 = free_wheel(30.0), free_wheel(100.0)
    tc, tr, t10 = top("compliant"), top("rigid"), top("compliant", 10000.0)

    def both(key: str, fmt) -> str:
        c, r = fmt(tc[key]), fmt(tr[key])
        return f"{c} compliant and rigid" if c == r else f"{c} compliant, {r} rigid"

    tilt = max(abs(tc["tilt"] - TOP_TILT), abs(tr["tilt"] - TOP_TILT))
    rows = [
        ("free wheel (disc, 0.05 rad wobble), 30 rad/s: energy", "+10.4 %", kept(w30["energy"])),
        ("same, 100 rad/s", "diverged at 1.55 s", kept(w100["energy"])),
        ("same: world angular momentum, 30 / 100 rad/s", "2.6 % / diverged",
         f"{sci(w30['L'])} / {sci(w100['L'])}"),
        ("same: the axle's precession about L against \\|L\\|/I₁, 30 / 100 rad/s", "",
         f"{sci(w30['precession'], 1)} / {sci(w100['precession'], 1)}"),
        ("top on its tip (flat, 1 cm up), 300 rad/s, 0.1 rad tilt, 0.05 rad wobble, compliant "
         "or rigid: total energy", "diverged at 0.17 s",
         f"{both('energy', pct)}, {pct(t10['energy'])} at 10 kHz (the tip's first slip)"),
        ("same: precession against m g l / (I₃ ω)", "",
         f"{both('precession', lambda x: pct(x, 1))}, {pct(t10['precession'], 1)} at 10 kHz; "
         f"tilt kept to {tilt:.3f} rad"),
        ("asymmetric body, origin 10 cm off its centre of mass, 50 rad/s: energy", "×48",
         pct(asymmetric_body())),
    ]
    lines = ["| case | up to fdb5e48 (explicit) | now |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |".replace("|  |", "| |") for a, b, c in rows]
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# docs/physics.md: sliding friction against Coulomb's closed forms
# ---------------------------------------------------------------------------

def friction_table() -> str:
    """test/core/contact/test_friction_direction.py's box at 250 Hz, 1 kHz, 4 kHz, both
    models; the "compliant before" column is fdb5e48's (the last step's friction direction
    kept), measured once."""
    from helpers.friction_box import ALPHA, MODELS, RATES, exact_curve, sideways_slide, spin_braking
    _, stop = exact_curve()

    def braking(model: str) -> str:
        a = [spin_braking(model, rate)["alpha"] for rate in RATES]
        err = max(abs(x / ALPHA - 1.0) for x in a)
        shown = [f"{x:.2f}" for x in a]
        within = "(< 0.001 %)" if err < 1e-5 else f"(within {err * 100:.3f} %)"
        if len(set(shown)) == 1:
            return f"{shown[0]} at all three {within}"
        return " / ".join(shown) + f" {within}"

    def stop_error(model: str) -> str:
        ends = [sideways_slide(model, rate)["end"] for rate in RATES]
        return " ; ".join(" / ".join(pct(e[i] / stop[i] - 1.0)[:-2] for e in ends) + " %"
                          for i in (0, 1))

    cols = {m: (braking(m), stop_error(m)) for m in MODELS}
    lines = ["| 250 Hz / 1 kHz / 4 kHz | compliant before | compliant now | rigid |",
             "|---|---|---|---|",
             f"| spin braking, exact {ALPHA:.2f} rad/s² | 72.2 / 71.0 / 70.8 (−31 %) | "
             f"{cols['compliant'][0]} | {cols['rigid'][0]} |",
             f"| launched at 2 m/s, pushed sideways by 6 N: stop point, exact ({stop[0]:.3f}, "
             f"{stop[1]:.3f}) m: error along x / y | −21 / −49 / −13 % ; +125 / +100 / +217 % | "
             f"{cols['compliant'][1]} | {cols['rigid'][1]} |"]
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# docs/physics.md: the humanoid lying face down, against MuJoCo
# ---------------------------------------------------------------------------

def mujoco_lying_table() -> str:
    """test/core/contact/test_mujoco_lying.py's rests (3 s at 1 kHz, both models, MuJoCo's
    twin) compared; the MuJoCo version in the header (another version may rest elsewhere)."""
    import mujoco

    from helpers.lying import JOINT_TOLERANCE, SPAN, compare, mujoco_rest, wb_sim_rest
    model, data = mujoco_rest()
    d = {m: compare(wb_sim_rest(m), model, data) for m in ("compliant", "rigid")}
    c, r = d["compliant"], d["rigid"]

    def mm(x: float) -> str:
        return f"{x * 1e3:.2f}"

    def signed_mm(x: float) -> str:
        return f"{x * 1e3:+.2f}".replace("-", MINUS)

    def named(x: str) -> str:
        return x.replace("_", " ")

    def depth(x: float) -> str:
        return f"{x * 1e3:.2f} mm" if x >= 1e-5 else f"{x * 1e6:.1f} µm"

    bound = f"{mm(c['height_bound'])} / {mm(r['height_bound'])} mm"
    lines = [
        f"| face down, 3 s at 1 kHz (MuJoCo {mujoco.__version__}) | compliant | rigid | bound, "
        "compliant / rigid |",
        "|---|---|---|---|",
        f"| base height (MuJoCo: {mm(c['mujoco_base_z'])} mm) | {mm(c['base_z'])} mm "
        f"({signed_mm(c['base_z'] - c['mujoco_base_z'])}) | {mm(r['base_z'])} mm "
        f"({signed_mm(r['base_z'] - r['mujoco_base_z'])}) | {bound} |",
        f"| angle between the two base frames | {math.degrees(c['angle']):.2g}° | "
        f"{math.degrees(r['angle']):.2g}° | {math.degrees(c['height_bound'] / SPAN):.2f}° / "
        f"{math.degrees(r['height_bound'] / SPAN):.2f}° |",
        f"| largest difference of a link origin's height ({c['links']} links) | "
        f"{mm(c['link_dz'])} mm ({named(c['worst_link'])}) | {mm(r['link_dz'])} mm "
        f"({named(r['worst_link'])}) | {bound} |",
        f"| largest joint difference ({c['joints']} joints) | {math.degrees(c['joint']):.2f}° "
        f"({named(c['worst_joint'])}) | {math.degrees(r['joint']):.2f}° "
        f"({named(r['worst_joint'])}) | {math.degrees(JOINT_TOLERANCE):.1f}° |",
        f"| deepest contact point (MuJoCo: {mm(c['mujoco_sink'])} mm) | "
        f"{depth(c['wb_sim_sink'])} (the law's sink) | {depth(r['wb_sim_sink'])} | |",
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# docs/physics.md: the drives (dc_motor) against closed forms, the humanoid on them
# ---------------------------------------------------------------------------

def drives_table() -> str:
    """test/core/test_actuators.py's runs: the AK80-9 defaults on a wheel (the torque loop's
    step response) and on the humanoid's legs (standing 5 s against ideal drives; an 8 V
    squat against the torque-speed envelope)."""
    from helpers.drives import LEGS, legs_stand, squat, torque_step, wheel

    def tiny(x: float, what: str) -> str:
        return f"< 1e-12 {what}" if x < 1e-12 else f"{sci(x)} {what}"

    motor = wheel().actuators
    stall, no_load = float(motor.stall_torque()[0]), float(motor.no_load_speed()[0])
    steps = {rate: torque_step(rate) for rate in (10000.0, 1000.0, 100.0)}
    fine = steps[10000.0]
    stand, ideal = legs_stand(True), legs_stand(False)
    sim = stand["sim"]
    r = sim.actuator_readings
    knees = [sim.joint_names.index(n) for n in ("l_knee", "r_knee")]

    def knee(fmt) -> str:
        shown = [fmt(k) for k in knees]
        return shown[0] if shown[0] == shown[1] else " / ".join(shown)

    carry = (f"{knee(lambda k: f'{abs(sim.applied_torques[k]):.1f}')} N·m, "
             f"{knee(lambda k: f'{abs(r.current[k]):.1f}')} A at "
             f"{knee(lambda k: f'{abs(r.voltage[k]):.1f}')} V, winding "
             f"{knee(lambda k: f'{r.temperature[k]:.2f}')} °C")
    low = squat(8.0)
    rows = [
        ("AK80-9 (the defaults): stall torque, no-load speed at the joint",
         f"{stall:.1f} N·m, {no_load:.2f} rad/s ({no_load * 30 / math.pi:.0f} rpm)",
         "N η kt V / R, V / (kt N)"),
        ("20 Hz, ζ = 0.4 torque loop, a 10 N·m step: every sample at 10 kHz / 1 kHz / 100 Hz",
         _same_or_each([tiny(steps[k]["error"], "of the step") for k in steps], "at all three"),
         "the closed form at (k + 1) dt"),
        ("same, 10 kHz: rise time (10–90 %), overshoot",
         f"{fine['rise'] * 1e3:.3f} ms, {fine['overshoot'] * 100:.3f} %",
         f"{fine['rise_exact'] * 1e3:.3f} ms ({sci(abs(fine['rise'] / fine['rise_exact'] - 1), 1)}), "
         f"{fine['overshoot_exact'] * 100:.3f} % "
         f"({sci(abs(fine['overshoot'] / fine['overshoot_exact'] - 1), 1)})"),
        (f"humanoid, AK80-9 on its {len(LEGS)} leg joints, 200 Hz ζ = 0.7 loop (assumed), shipped "
         "PD + gravity controller, 5 s: base below its start",
         f"{stand['drop'] * 1e3:.2f} mm", f"{ideal['drop'] * 1e3:.2f} mm with ideal drives"),
        ("same, crouched: each knee after 5 s", carry, ""),
        (f"fed 8 V (stall {low['stall']:.1f} N·m, no-load {low['no_load']:.2f} rad/s), a squat "
         "of 1.2 rad at the knees and back in 1.5 s, twice: steps on the envelope",
         f"{low['bound']} of 3000", ""),
        ("same: the largest leg torque beyond N η kt (±V − kt N q̇)/R at the step's starting "
         "speed", tiny(low["excess"], "of stall"), "0"),
        ("same: the base's lowest point below its start; back to it within",
         f"{low['depth'] * 100:.0f} cm; {low['end_dz'] * 1e3:.1f} mm", ""),
    ]
    lines = ["| drives (`test/core/test_actuators.py`) | measured | closed form, reference |",
             "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |".replace("|  |", "| |") for a, b, c in rows]
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# docs/physics.md: torsional friction
# ---------------------------------------------------------------------------

def torsion_table() -> str:
    """test/core/contact/test_torsional_friction.py's ball braking at 250 Hz, 1 kHz, 4 kHz."""
    from helpers.torsion import ALPHA, MODELS, braking
    rates = (250.0, 1000.0, 4000.0)
    lines = [f"| braking, exact `l m g / I` = {ALPHA:.3f} rad/s² | 250 Hz / 1 kHz / 4 kHz |",
             "|---|---|"]
    for model in MODELS:
        a = [braking(model, rate)["alpha"] for rate in rates]
        err = [x / ALPHA - 1.0 for x in a]
        shown = _same_or_each([f"{x:.3f}" for x in a], "at all three")
        if max(map(abs, err)) < 1e-5:
            off = "< 0.001 %"
        else:
            lo, hi = sorted((min(err, key=abs), max(err, key=abs)), key=abs)
            off = f"{pct(lo, 3)[:-2]} to {pct(hi, 3)}" if pct(lo, 3) != pct(hi, 3) else pct(hi, 3)
        lines.append(f"| {model} | {shown} ({off}) |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# docs/physics.md: the four-bar against its one degree of freedom
# ---------------------------------------------------------------------------

def fourbar_sentence() -> str:
    """test/core/test_loop_closures.py's parallelogram swing (2 s at 1 kHz)."""
    from helpers.fourbar import swing
    got = swing()
    return ("A parallelogram four-bar released under gravity (2 s at 1 kHz) follows the closed "
            "form of its one degree\nof freedom (a pendulum: the coupler translates) to "
            f"{100 * got['worst'] / got['amplitude']:.2f} % of its {got['amplitude']:.2f} rad "
            "swing.")


# ---------------------------------------------------------------------------
# docs/physics.md: the humanoid carrying a payload
# ---------------------------------------------------------------------------

def payload_sentence() -> str:
    """test/core/test_payloads.py's humanoid with a crate on its torso, 5 s."""
    from helpers.robots import CRATE, crate_stand
    got = crate_stand()
    return (f"The humanoid with {CRATE:g} kg on its torso stands 5 s under the example PD + "
            f"gravity controller\n({got['drop'] * 1e3:.1f} mm lower, tilted "
            f"{got['tilt_deg']:.2f}°, the feet carrying (m + {CRATE:g} kg) g to "
            f"{sci(abs(got['carried']), 1)}).")


# ---------------------------------------------------------------------------
# docs/world.md: the shipped worlds
# ---------------------------------------------------------------------------

def world_box_figures() -> str:
    """test/core/test_world.py's run of config/worlds/humanoid_box.yaml (2 s, and its robot
    0.5 s without the box)."""
    from helpers.worlds import humanoid_box
    box = humanoid_box()
    z = box["base_z"]
    return "\n".join(_wrap(line, "  ") for line in [
        f"* With friction alone (μ = {box['mu']:g}, deceleration μg) the box would stop with "
        f"its centre at x = {box['x_friction']:.3f} m, its rear face inside the feet.",
        f"* Instead it meets the robot and rebounds (moving away from it from "
        f"t = {box['rebound_t']:.3f} s, at up to {box['vx'].max():.2f} m/s), and comes to rest "
        f"at x = {box['x'][-1]:.3f} m: {box['x'][-1] - box['x_friction']:.3f} m short of where "
        f"friction alone would have stopped it.",
        f"* The impact pushes the robot's base {-box['pushed'] * 1e3:.1f} mm further back "
        f"(at t = {box['pushed_t']:.2f} s) than the same robot without the box, which settles "
        f"{-box['x_alone'].min() * 1e3:.1f} mm back on its own.",
        f"* The robot stands: its base height stays between {z.min():.4f} and "
        f"{max(z.max(), box['qs'][0, 2]):.4f} m."])


def world_playground_figures() -> str:
    """test/core/test_world.py's run of config/worlds/objects_playground.yaml (2 s)."""
    import numpy as np

    from helpers.worlds import playground
    play = playground()
    moved = max(float(np.linalg.norm(play["end"][n][:2] - play["start"][n][:2]))
                for n in play["start"])
    speed = max(play["speed"].values())
    sink = {n: (play["start"][n][2] - play["end"][n][2]) * 1e3 for n in play["start"]}
    return _wrap(
        "After 2 s every object is within "
        + (f"{moved * 1e3:.2f} mm" if moved >= 5e-6 else "0.01 mm")
        + " (horizontally) of where it was put, "
        + (f"at {speed:.2g} m/s at the most" if speed >= 1e-6 else "at rest (under 1 µm/s)")
        + ". Each has sunk only by the compliant contacts under it: "
        + ", ".join(f"{n} {sink[n]:.1f} mm" for n in sink)
        + f". The robot's base stays above {play['qs'][:, 2].min():.3f} m.")


def world_push_figures() -> str:
    """test/core/test_world_push.py's runs of config/worlds/humanoid_pushes_box.yaml (5.5 s,
    its compliant contact and the rigid one in its place)."""
    from helpers.worlds import pushes_box
    soft, hard = pushes_box("compliant"), pushes_box("rigid")
    mu_g = soft["mu"] * soft["g"]
    return "\n".join(_wrap(line, "  ") for line in [
        f"* The box slides {soft['moved']:.3f} m (rigid contact: {hard['moved']:.3f} m), "
        f"at up to {soft['peak_v']:.2f} m/s (t = {soft['peak_t']:.2f} s), flat on the floor "
        f"(tilted {soft['pitch'].max():.4f} rad at the most).",
        f"* From t = {soft['release_t']:.3f} s, 1 mm off the hands at {soft['release_v']:.2f} "
        f"m/s, it slides on alone {soft['slide'] * 1e3:.1f} mm, decelerating at "
        f"{soft['decel']:.3f} m/s² (rigid: {hard['decel']:.3f} m/s²) against μg = "
        f"{mu_g:.3f} m/s², and stops.",
        f"* The robot stands on both feet: its base goes down to {soft['base_z'].min():.3f} m "
        f"and back up to {soft['base_z'][-1]:.3f} m (start {soft['z0']:.3f} m), its soles move "
        f"{soft['feet'].max() * 1e3:.2f} mm on the floor and tilt {soft['tilt'].max():.3f} rad "
        f"at the most (rocking forward on the toes after the release)."])


def _wrap(text: str, indent: str = "", width: int = 96) -> str:
    import textwrap
    return "\n".join(textwrap.wrap(text, width, subsequent_indent=indent,
                                    break_on_hyphens=False))


# ---------------------------------------------------------------------------
# the blocks
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Block:
    name: str
    page: str                 # relative to the repository
    make: Callable[[], str]   # the block's text, unindented, without its markers
    what: str                 # the runs behind it, and what they cost
    needs: Callable[[], None] = lambda: None  # skips (or fails) where an extra is missing


BLOCKS = {b.name: b for b in [
    Block("campaign-excerpt", "docs/campaigns.md", campaign_excerpt,
          "5 cases of examples/push_recovery.yaml, 3 s of the humanoid each"),
    Block("gyroscopic", "docs/physics.md", gyroscopic_table,
          "test_gyroscopic.py's wheel, body and tops, 5 s at 1 kHz (top also 10 kHz)"),
    Block("friction", "docs/physics.md", friction_table,
          "test_friction_direction.py's box, 12 runs of < 1 s"),
    Block("torsion", "docs/physics.md", torsion_table,
          "test_torsional_friction.py's ball, 6 runs of 1.1 s"),
    Block("drives", "docs/physics.md", drives_table,
          "test_actuators.py's wheel step responses, the humanoid 5 s on drives and ideal, "
          "the 8 V squat (3 s)"),
    Block("fourbar", "docs/physics.md", fourbar_sentence,
          "test_loop_closures.py's parallelogram swing, 2 s at 1 kHz"),
    Block("payload", "docs/physics.md", payload_sentence,
          "test_payloads.py's humanoid with a crate, 5 s"),
    Block("world-box", "docs/world.md", world_box_figures,
          "test_world.py's run of humanoid_box.yaml, 2 s (and 0.5 s of the robot alone)"),
    Block("world-playground", "docs/world.md", world_playground_figures,
          "test_world.py's run of objects_playground.yaml, 2 s"),
    Block("world-push", "docs/world.md", world_push_figures,
          "test_world_push.py's runs of humanoid_pushes_box.yaml, 5.5 s on each contact law"),
    Block("mujoco-lying", "docs/physics.md", mujoco_lying_table,
          "test_mujoco_lying.py's humanoid, 3 s at 1 kHz, both models and MuJoCo's twin",
          needs=lambda: __import__("helpers.extras").extras.require_mujoco()),
]}


def _pattern(name: str) -> re.Pattern:
    return re.compile(rf"^([ \t]*){re.escape(_begin(name))}\n(.*?)^[ \t]*{re.escape(_end(name))}$",
                      re.S | re.M)


def markers_in(text: str) -> list[str]:
    """The names of the generated blocks a page marks, in order."""
    return re.findall(r"^[ \t]*<!-- generated: (\S+) .*-->$", text, re.M)


def shown(block: Block) -> str:
    """The block's text as the page shows it, unindented."""
    text = (ROOT / block.page).read_text()
    found = _pattern(block.name).findall(text)
    if len(found) != 1:
        raise LookupError(f"{block.page} has {len(found)} blocks marked {_begin(block.name)!r}"
                          f" ... {_end(block.name)!r}; it needs exactly one")
    indent, body = found[0]
    return "\n".join(line[len(indent):] for line in body.rstrip("\n").split("\n"))


def replace(text: str, name: str, body: str) -> str:
    """``text`` with block ``name``'s lines replaced by ``body``, indented as its markers."""
    def sub(m: re.Match) -> str:
        indent = m.group(1)
        lines = "\n".join(indent + line if line else line for line in body.split("\n"))
        return f"{indent}{_begin(name)}\n{lines}\n{indent}{_end(name)}"
    out, n = _pattern(name).subn(sub, text)
    if n != 1:
        raise LookupError(f"{n} blocks marked {name!r}; it needs exactly one")
    return out


def difference(block: Block, now: str) -> str:
    """'' when the page shows ``now``, else a unified diff and the command that refreshes it."""
    was = shown(block)
    if was == now:
        return ""
    diff = "\n".join(difflib.unified_diff(was.split("\n"), now.split("\n"),
                                          f"{block.page} (shown)", "this run", lineterm=""))
    return (f"{block.page}'s generated block {block.name!r} is stale ({block.what}):\n{diff}\n"
            f"If the change is meant, refresh it: python tools/docs_rows.py --write {block.name}")


def write(names: list[str] | None = None, log=print) -> list[str]:
    """Regenerate the blocks ``names`` (all by default) into their pages; the names changed."""
    changed = []
    for name in names or list(BLOCKS):
        block = BLOCKS[name]
        now = block.make()
        if shown(block) != now:
            path = ROOT / block.page
            path.write_text(replace(path.read_text(), name, now))
            changed.append(name)
        log(f"{name}: {'written into ' + block.page if name in changed else 'unchanged'}")
    return changed
