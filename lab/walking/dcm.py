"""The feedback walker: divergent component of motion (DCM) tracking, ZMP feedback and step adjustment.

The joint-PD walk (:mod:`lab.walking.walk`) tracks a planned CoM open loop and falls: an LIPM error grows
as ``e^(omega t)`` and nothing reacts to it. This walker closes the loop on the measured DCM
``xi = c + c_dot / omega`` every control tick (100 Hz); the joint PD (the robot's own law) stays the
innermost loop at the physics rate.

1. **Footsteps from the velocity command** (``set_command(vx, vy, yaw_rate)``). The swing foot's nominal
   foothold is the support foot moved by the command: ``vx T`` ahead, the walking width beside (plus
   ``2 vy T`` on steps toward ``vy``), turned by ``2 yaw_rate T`` on steps toward the turn, bounded to the
   legs' reach; the walked-distance shortfall is added back (``speed_gain``), so the feet realise the
   command. A zero command closes the feet side by side; the walker stands once the DCM is inside them.
2. **DCM reference** from a preview of the next footholds (Englsberger's closed-form recursion with one
   ZMP per step): ``xi_eos_i = p_(i+1) + (xi_eos_(i+1) - p_(i+1)) e^(-omega T)``, ending with the feet
   side by side; within a step ``xi_ref(t) = p + (xi_eos - p) e^(omega (t - t_end))``, ``p`` the support
   sole centre.
3. **ZMP feedback** ``p* = p + (1 + k_xi / omega) (xi - xi_ref) + k_i int(xi - xi_ref)``, clamped to the
   support polygon (the support sole; both soles in double support). It is realised by ankle torques
   (target offsets ``(dx a_y - dy a_x) F_z / kp`` on each ankle joint of the loaded feet) and by the CoM
   command: the pelvis is placed (by the foot IK and a whole-body CoM fixed point) so the model's CoM is
   ``c_ref + k_adm (xi_ref - xi)``, with ``c_ref' = omega (xi_ref - c_ref)``.
4. **Step adjustment and timing.** From ``adjust_after`` to ``freeze`` of the swing the foothold is the
   nominal one moved by the DCM error predicted at the end of the step under the clamped ZMP law
   (rate-limited to ``adjust_rate``). When the reach box cuts that foothold the step is re-timed to land
   within ``retime_lead`` (never shorter than ``ss_min``); a swing foot that already carries weight has
   landed. At the end of a double support the foot that just landed carries next, unless the DCM stayed
   on the other foot's side: then the unloaded foot steps again.
5. **Standing** the walker holds the DCM over the feet by the same ZMP feedback; with ``capture_step`` it
   steps when the DCM leaves ``capture_at`` of the feet's polygon (the foot nearer the DCM carries). Until it
   stands again its swing foot lifts ``capture_height`` and is solved from the measured pelvis pose: the
   push tips the stance foot over its edge, and a low swing foot scuffs the floor and lands short.
6. **Posture.** The commanded pelvis orientation feeds back the measured tilt (``k_tilt``); beyond
   ``swing_measured_deg`` of tilt the swing leg is solved from the measured pelvis pose, so the foot lands
   where it was sent.
7. **Hip strategy.** A push toward the stance foot early in single support drives the DCM over the foot's
   outer edge, where the reach box forbids the crossover step that would catch it and the ankle has no
   torque left. When the ZMP command leaves the stance foot outward, the pelvis leans into the push
   (``hip_gain`` per metre of excess beyond ``hip_deadband``, at most ``hip_max``, back at ``hip_return``):
   the upper body's angular momentum moves the centroidal moment pivot beyond the foot while the swing foot
   is in the air.

Everything is measured through the engine interface (base pose, joint angles, CoM, foot contacts), so
MuJoCo and PyBullet run the same law. :mod:`lab.walking.feedback_run` runs it headless; the ``walk``
mode (:mod:`lab.walking.mode`) plays it live.
"""

import collections
import math
import time
from dataclasses import dataclass, field

import mujoco
import numpy as np

from lab.control.metrics import convex_hull
from lab.robots.model import Robot
from lab.walking.geometry import GaitGeometry, measure_geometry
from lab.walking.ik import IKConfig, LegIK
from lab.walking.lipm import G

TRIM = np.array([0.05, 0.03, 0.3])  # largest speed trims: vx, vy [m/s], yaw rate [rad/s]
SIDE_SIGN = (1.0, -1.0)  # +y is outward for the left foot (0), -y for the right (1)


@dataclass(frozen=True)
class FeedbackParams:
    ss: float = 0.35  # single support [s]
    ds: float = 0.10  # double support after each step [s]
    ds_first: float = 0.30  # weight shift before the first step [s]
    step_height: float = 0.03  # swing apex [m]
    width: float | None = None  # ankle spacing while walking [m]; None = standing spacing
    k_xi: float = 3.0  # DCM feedback gain [1/s]
    k_i: float = 0.5  # integral gain on the DCM error [1/s]
    zmp_margin: float = 0.004  # ZMP kept this far inside the support polygon [m]
    step_gain: float = 1.0  # share of the predicted DCM error the foothold takes [-]
    authority: float = 0.5  # share of the support polygon the ZMP is trusted to reach in the prediction [-]
    k_adm: float = 2.0  # CoM admittance on the DCM error [-]
    speed_gain: float = 0.3  # share of the walked-distance shortfall made up per step [-]
    adm_clip: float = 0.03  # largest admittance offset [m]
    freeze: float = 0.75  # fraction of the swing after which the foothold stays put [-]
    max_dx: float = 0.20  # foothold reach ahead of the support ankle [m]
    min_dx: float = -0.15  # ... and behind [m]
    min_width: float = 0.13  # closest ankle spacing [m]
    max_width: float = 0.30  # widest ankle spacing [m]
    max_turn: float = 0.5  # largest yaw between the feet [rad]
    vx_max: float = 0.3  # command bounds [m/s], [rad/s]
    vy_max: float = 0.15
    yaw_rate_max: float = 1.0
    k_tilt: float = 0.3  # measured pelvis tilt fed back into the commanded pelvis orientation [-]
    tilt_clip: float = 0.3  # [rad]
    swing_measured_deg: float = (
        6.0  # beyond this torso tilt the swing leg is solved from the measured pelvis pose [deg]
    )
    adjust_after: float = 0.1  # the foothold follows the DCM from this share of the swing on [-]
    adjust_rate: float = 4.0  # ... moving at most this fast [m/s]
    ss_min: float = 0.22  # shortest single support when a step is re-timed [s]
    retime_cut: float = 0.01  # re-time a step whose foothold the reach cuts by more than this [m]
    retime_lead: float = 0.18  # ... to land this soon [s]
    early_after: float = (
        0.5  # a swing foot that carries this share of the weight after this share of the swing has landed
    )
    early_load: float = 0.25
    same_foot: bool = True  # the foot that just landed steps again when the DCM stayed on the other foot's side
    same_foot_at: float = 0.02  # ... by more than this from the feet's midline at the end of double support [m]
    capture_step: bool = True  # standing, step when the DCM leaves the feet (else ankle/CoM feedback only)
    capture_at: float = 0.8  # ... leaves this share of the feet's polygon [-]
    hip_gain: float = 6.0  # hip strategy: pelvis lean per metre of ZMP command outside the stance foot [rad/m]
    hip_deadband: float = 0.02  # ... counted beyond this much excess [m]
    hip_max: float = 0.45  # ... at most [rad]
    hip_return: float = 1.0  # ... coming back upright at most this fast [rad/s]
    capture_height: float = 0.05  # swing apex of capture steps [m]; their swing leg is solved from the measured pelvis
    dt: float = 0.01  # control tick [s]
    ik: IKConfig = field(default_factory=lambda: IKConfig(max_iters=15))

    @property
    def period(self) -> float:
        return self.ss + self.ds


class Foot:
    """A foothold: ankle ``xy`` (2,) [m] and ``yaw`` [rad]."""

    __slots__ = ("xy", "yaw")

    def __init__(self, xy, yaw: float):
        self.xy = np.array(xy[:2], float)
        self.yaw = float(yaw)

    def copy(self) -> "Foot":
        return Foot(self.xy, self.yaw)


def rot(yaw: float) -> np.ndarray:
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([[c, -s], [s, c]])


def yaw_quat(yaw: float) -> np.ndarray:
    return np.array([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)])


def wrap(a: float) -> float:
    return (a + math.pi) % (2 * math.pi) - math.pi


def clamp_to_polygon(p: np.ndarray, poly: np.ndarray) -> tuple[np.ndarray, bool]:
    """``p`` (2,) if inside the convex counter-clockwise polygon ``poly`` (k, 2), else its nearest point on it."""
    n = len(poly)
    inside = True
    for i in range(n):
        a, b = poly[i], poly[(i + 1) % n]
        if (b[0] - a[0]) * (p[1] - a[1]) - (b[1] - a[1]) * (p[0] - a[0]) < 0:
            inside = False
            break
    if inside:
        return p, False
    best, bd = p, math.inf
    for i in range(n):
        a, b = poly[i], poly[(i + 1) % n]
        ab = b - a
        t = min(1.0, max(0.0, float((p - a) @ ab) / max(float(ab @ ab), 1e-12)))
        q = a + t * ab
        d = float((p - q) @ (p - q))
        if d < bd:
            best, bd = q, d
    return best, True


def hull(points) -> np.ndarray:
    """Counter-clockwise convex hull (k, 2) of ``points`` (n, 2) (:func:`lab.control.metrics.convex_hull`)."""
    return np.array(convex_hull(np.asarray(points, float)))


class FeedbackWalker:
    """DCM feedback walking for ``robot``: :meth:`start`, then :meth:`update` every ``params.dt``."""

    controller = "feedback"

    def __init__(self, robot: Robot, params: FeedbackParams | None = None, geometry: GaitGeometry | None = None):
        self.robot = robot
        self.params = p = params or FeedbackParams()
        self.geo = g = geometry or measure_geometry(robot)
        self.ik = LegIK(robot, g, p.ik)
        self.legs = g.legs
        self._fk = mujoco.MjData(robot.model)
        self.omega = math.sqrt(G / g.com_height)
        self.width = float(p.width or g.ankle_spacing)
        corners = np.array(g.sole_corners)[:, :2]
        shrink = np.sign(corners - corners.mean(0)) * p.zmp_margin
        self._sole = corners - shrink  # ankle-frame sole polygon, shrunk by the margin
        self._balance = np.array([g.balance_x, 0.0])
        self.cmd = np.zeros(3)  # vx, vy [m/s], yaw rate [rad/s] in the walking frame
        self.q_target = robot.q_nominal.copy()
        self.state: dict = {}
        self.events: list = []  # one dict per touchdown
        self.duration = None  # endless: walks while commanded
        self.cost_s = 0.0  # wall time of the last update [s]
        self.costs = collections.deque(maxlen=10_000)  # ... of the recent updates

    # --- command ------------------------------------------------------------------------------
    def set_command(self, vx: float = 0.0, vy: float = 0.0, yaw_rate: float = 0.0) -> np.ndarray:
        p = self.params
        self.cmd = np.array(
            [
                float(np.clip(vx, -p.vx_max, p.vx_max)),
                float(np.clip(vy, -p.vy_max, p.vy_max)),
                float(np.clip(yaw_rate, -p.yaw_rate_max, p.yaw_rate_max)),
            ]
        )
        return self.cmd

    @property
    def moving(self) -> bool:
        return bool(np.any(np.abs(self.cmd) > 1e-6))

    # --- measurement --------------------------------------------------------------------------
    def measured_feet(self, qpos: np.ndarray) -> list:
        """Both measured footholds (ankle xy, yaw) and ankle heights of a MuJoCo ``qpos``."""
        self._fk.qpos[:] = qpos
        mujoco.mj_kinematics(self.robot.model, self._fk)
        out = []
        for leg in self.legs:
            R = self._fk.xmat[leg.foot_body].reshape(3, 3)
            out.append(
                (
                    Foot(self._fk.xpos[leg.foot_body], math.atan2(R[1, 0], R[0, 0])),
                    float(self._fk.xpos[leg.foot_body, 2]),
                )
            )
        return out

    def sole_center(self, f: Foot) -> np.ndarray:
        return f.xy + rot(f.yaw) @ self._balance

    def sole_polygon(self, f: Foot) -> np.ndarray:
        return f.xy + self._sole @ rot(f.yaw).T

    # --- start --------------------------------------------------------------------------------
    def start(self, engine) -> None:
        """Stand where ``engine``'s robot stands now; walking starts when a command is set."""
        p = self.params
        feet = self.measured_feet(engine.mj_qpos())
        self.feet = [f for f, _ in feet]
        self.ground = float(np.mean([z for _, z in feet]))
        com = engine.com()
        self.c_meas = com[:2].copy()
        self.v_meas = np.zeros(2)
        self.c_cmd = com[:2].copy()
        self.v_cmd = np.zeros(2)
        self.com_offset = com[:2] - engine.base_pose()[0][:2]
        a, b = self.feet
        self._stand_offset = rot(-(a.yaw + 0.5 * wrap(b.yaw - a.yaw))) @ (com[:2] - 0.5 * (a.xy + b.xy))
        q, _ = engine.joint_state()
        self.q_legs = [np.array(q[list(leg.act)]) for leg in self.legs]
        self.pelvis_z = float(self.robot.standing_height)
        self.heading = float(np.mean([f.yaw for f in self.feet]))
        self.phase = "stand"
        self.t_phase = 0.0  # time in the current phase [s]
        self.support = -1  # side carrying the robot in "ss"; the side the step starts from
        self.step = 0  # steps taken
        self.swing_from: Foot | None = None
        self.ss_left, self.swing_s, self.retimed = p.ss, 0.0, False  # single support left [s], swing progress [0, 1]
        self.target: Foot | None = None  # the swing foot's foothold (adjusted)
        self.nominal: Foot | None = None  # ... before adjustment
        self.xi_int = np.zeros(2)
        self.captures = 0  # capture steps taken from standing
        self.capturing = False  # stepping to recover from standing (until it stands again)
        self.repeats = 0  # steps taken twice in a row by the same foot (the DCM beyond it)
        self.deficit = np.zeros(3)  # commanded minus walked distance (x, y [m], yaw [rad]) in the walking frame
        self.speed_trim = np.zeros(3)  # added to the commanded speed so that the feet realise it [m/s]
        self.saturated = False
        self.lean = np.zeros(2)  # hip strategy: pelvis lean, rotation vector (x, y) in the heading frame [rad]
        self.adjust = np.zeros(2)
        self.step_cut = False  # the reach box cut the last foothold the DCM asked for
        self.events = []
        self._last_t = None
        self.t = 0.0
        self._zmp_star = self._mid()
        self._xi_ref = self._mid()
        self.update(0.0, engine)

    def _stand_point(self) -> np.ndarray:
        """Where the CoM stands over the feet: the standing pose's CoM, in the feet's middle frame."""
        a, b = self.feet
        yaw = a.yaw + 0.5 * wrap(b.yaw - a.yaw)
        return 0.5 * (a.xy + b.xy) + rot(yaw) @ self._stand_offset

    def _mid(self) -> np.ndarray:
        return 0.5 * (self.sole_center(self.feet[0]) + self.sole_center(self.feet[1]))

    # --- footstep rule ------------------------------------------------------------------------
    def _next_foothold(self, support: int, sup: Foot, cmd) -> Foot:
        """Nominal foothold of the swing foot (``1 - support``) from the support foothold ``sup``."""
        p, T = self.params, self.params.period
        swing = 1 - support
        s = SIDE_SIGN[swing]
        yaw = sup.yaw
        if cmd[2] * s > 0:  # the foot on the side of the turn leads it; the other closes parallel
            yaw += float(np.clip(2.0 * (cmd[2] + self.speed_trim[2]) * T, -p.max_turn, p.max_turn))
        lateral = s * self.width
        if cmd[1] * s > 0:
            lateral += 2.0 * (cmd[1] + self.speed_trim[1]) * T
        local = np.array([(cmd[0] + self.speed_trim[0]) * T if abs(cmd[0]) > 1e-6 else 0.0, lateral])
        return self._bound(support, sup, Foot(sup.xy + rot(0.5 * (sup.yaw + yaw)) @ local, yaw))[0]

    def _bound(self, support: int, sup: Foot, f: Foot) -> tuple[Foot, bool]:
        """``f`` held inside the reach box of the swing leg, expressed in the support foot's frame."""
        p = self.params
        s = SIDE_SIGN[1 - support]
        local = rot(sup.yaw).T @ (f.xy - sup.xy)
        x = float(np.clip(local[0], p.min_dx, p.max_dx))
        y = s * float(np.clip(s * local[1], p.min_width, p.max_width))
        yaw = sup.yaw + float(np.clip(wrap(f.yaw - sup.yaw), -p.max_turn, p.max_turn))
        cut = abs(x - local[0]) > 1e-6 or abs(y - local[1]) > 1e-6
        return Foot(sup.xy + rot(sup.yaw) @ np.array([x, y]), yaw), cut

    def _eos(self, support: int, sup: Foot, nxt: Foot, n: int = 3) -> np.ndarray:
        """End-of-step DCM reference of the step on ``sup`` whose swing foot lands at ``nxt``."""
        T = self.params.period
        a = math.exp(-self.omega * T)
        zmps = [self.sole_center(nxt)]
        s, f, other = 1 - support, nxt, sup
        for _ in range(n - 1):
            f2 = self._next_foothold(s, f, self.cmd) if self.moving else None
            if f2 is None:
                break
            zmps.append(self.sole_center(f2))
            s, f, other = 1 - s, f2, f
        # the preview ends with the feet side by side and the DCM at their middle
        xi = 0.5 * (zmps[-1] + (self.sole_center(other) if len(zmps) > 1 else self.sole_center(sup)))
        for z in reversed(zmps):
            xi = z + (xi - z) * a
        return xi

    # --- the tick -----------------------------------------------------------------------------
    def update(self, t: float, engine) -> np.ndarray:
        """Joint targets (nu,) [rad] at walk time ``t`` [s] from the measured state of ``engine``."""
        t_wall = time.perf_counter()
        q = self._update(t, engine)
        self.cost_s = time.perf_counter() - t_wall
        self.costs.append(self.cost_s)
        return q

    def _update(self, t: float, engine) -> np.ndarray:
        p, w = self.params, self.omega
        first = self._last_t is None or t - self._last_t <= 1e-9
        dt = p.dt if first else t - self._last_t
        self._last_t = t
        com = engine.com()
        c = com[:2]
        if not first:
            v = (c - self.c_meas) / dt
            self.v_meas = 0.5 * self.v_meas + 0.5 * v
        self.c_meas = c.copy()
        xi = c + self.v_meas / w
        qpos = engine.mj_qpos()
        feet_now = self.measured_feet(qpos)
        self._base = (np.array(qpos[0:3]), np.array(qpos[3:7]))
        loads = [0.0, 0.0]
        for contact in engine.foot_contacts():
            loads[contact.side] += contact.fz
        self._advance(dt if not first else 0.0, xi, feet_now, loads)

        # reference and support polygon of this instant
        if self.phase == "stand":
            p_ref = self._stand_point()
            xi_ref = p_ref
            poly = hull(np.vstack([self.sole_polygon(self.feet[0]), self.sole_polygon(self.feet[1])]))
        else:
            sup = self.feet[self.support]
            p_ref = self.sole_center(sup)
            t_end = (
                (p.ds_first - self.t_phase)
                if self.phase == "ds0"
                else ((self.ss_left + p.ds) if self.phase == "ss" else (p.ds - self.t_phase))
            )
            if self.phase == "ds0":  # weight shift: DCM from the middle to the first support foot
                xi_eos = self._eos(self.support, sup, self.nominal)
                xi_ref = p_ref + (xi_eos - p_ref) * math.exp(-w * (p.ss + p.ds))
                s = min(self.t_phase / p.ds_first, 1.0)
                xi_ref = (1 - s) * self._xi_start + s * xi_ref
                p_ref = (1 - s) * self._xi_start + s * p_ref
            else:
                nxt = self.nominal if self.phase == "ss" else self.feet[1 - self.support]
                xi_eos = self._eos(self.support, sup, nxt)
                xi_ref = p_ref + (xi_eos - p_ref) * math.exp(-w * max(t_end, 0.0))
            if self.phase == "ss":
                poly = hull(self.sole_polygon(sup))
            else:
                poly = hull(np.vstack([self.sole_polygon(self.feet[0]), self.sole_polygon(self.feet[1])]))

        err = xi - xi_ref
        self.xi_int = np.clip(self.xi_int + err * dt, -0.02, 0.02)
        K = 1.0 + p.k_xi / w
        zmp = p_ref + K * err + p.k_i * self.xi_int
        zmp_star, self.saturated = clamp_to_polygon(zmp, poly)
        self._hip_strategy(zmp - zmp_star, dt)
        if self.phase == "ss" and p.adjust_after <= self.swing_s < p.freeze:  # step adjustment
            tau = max(self.ss_left + p.ds, 0.0)
            end_err = self._predict_error(err, p_ref, xi_ref, poly, tau)
            want = Foot(self.nominal.xy + p.step_gain * end_err, self.nominal.yaw)
            bounded, self.step_cut = self._bound(self.support, sup, want)
            move = bounded.xy - self.target.xy
            big = float(np.linalg.norm(move))
            limit = p.adjust_rate * dt
            self.target = Foot(self.target.xy + (move * (limit / big) if big > limit else move), bounded.yaw)
            self.adjust = self.target.xy - self.nominal.xy
            short = float(np.linalg.norm(want.xy - bounded.xy))
            self._short_ticks = self._short_ticks + 1 if short > p.retime_cut else 0
            if self._short_ticks >= 3 and self.t_phase + self.ss_left > p.ss_min:  # out of reach: land sooner
                self.ss_left = max(p.ss_min - self.t_phase, min(self.ss_left, p.retime_lead), 0.0)
                self.retimed = True
        self._zmp_star, self._xi_ref, self._p_ref, self._poly = zmp_star, xi_ref, p_ref, poly

        # the CoM reference follows the DCM reference (stable forward), leading the servo by ``lead``
        self.c_cmd = self.c_cmd + w * (xi_ref - self.c_cmd) * dt
        self.v_cmd = w * (xi_ref - self.c_cmd)
        adm = np.clip(p.k_adm * (xi_ref - xi), -p.adm_clip, p.adm_clip)
        self._pose(feet_targets := self._foot_targets(), self.c_cmd + adm)
        self._ankle_torque(zmp_star - p_ref)
        self.state = {"xi": xi, "com": com, "feet_targets": feet_targets}
        return self.q_target

    def _predict_error(self, err, p_ref, xi_ref, poly, tau: float, n: int = 10) -> np.ndarray:
        """DCM error at the end of the step under the clamped ZMP law (the ZMP's authority scaled)."""
        p, w = self.params, self.omega
        h = tau / n
        a = math.exp(w * h)
        c = poly.mean(0)
        shrunk = c + p.authority * (poly - c)
        xi, ref = xi_ref + err, xi_ref
        K = 1.0 + p.k_xi / w
        for _ in range(n):
            z, _ = clamp_to_polygon(p_ref + K * (xi - ref), shrunk)
            xi = z + (xi - z) * a
            ref = p_ref + (ref - p_ref) * a
        return xi - ref

    def _hip_strategy(self, excess: np.ndarray, dt: float) -> None:
        """Lean the pelvis into a push that drives the DCM out over the stance foot's outer edge.

        ``excess`` (2,) [m] is the ZMP command beyond the support polygon (``p* - clamp(p*)``). In single support
        its part outward of the stance foot (toward the side a crossover step would be needed) beyond
        ``hip_deadband`` is taken: the pelvis and the upper body lean that way by ``hip_gain`` per metre (at most
        ``hip_max``), faster than the PD can, so their angular momentum moves the centroidal moment pivot
        outward (``L' = -m g d``) while the swing foot is still in the air; the lean comes back at
        ``hip_return``, and no lean the other way starts before it has. Walking undisturbed the ZMP command
        never leaves the stance foot outward."""
        p = self.params
        h = rot(self.heading).T @ excess
        out = SIDE_SIGN[self.support] * h[1] - p.hip_deadband if self.phase == "ss" else 0.0
        want = np.clip(np.array([-p.hip_gain * SIDE_SIGN[self.support] * max(out, 0.0), 0.0]), -p.hip_max, p.hip_max)
        want = np.where(want * self.lean < 0.0, 0.0, want)
        back = p.hip_return * dt
        grow = np.abs(want) > np.abs(self.lean)
        self.lean = np.where(grow, want, self.lean - np.clip(self.lean - want, -back, back))

    def _ankle_torque(self, shift: np.ndarray) -> None:
        """Move the CoP by ``shift`` (2,) [m]: ankle torques ``(dx a_y - dy a_x) F_z`` added as target offsets."""
        mg = self.robot.total_mass * G
        if self.phase == "ss":
            load = [0.0, 0.0]
            load[self.support] = mg
        else:
            c0, c1 = self.sole_center(self.feet[0]), self.sole_center(self.feet[1])
            d = c1 - c0
            s = float(np.clip((self._zmp_star - c0) @ d / max(float(d @ d), 1e-9), 0.0, 1.0))
            load = [(1 - s) * mg, s * mg]
        m, d = self.robot.model, self._fk
        for side, leg in enumerate(self.legs):
            for a in leg.act[4:]:  # the two joints next to the foot: ankle pitch and roll
                jid = int(m.actuator_trnid[a, 0])
                ax = d.xaxis[jid]
                tau = (shift[0] * ax[1] - shift[1] * ax[0]) * load[side]
                self.q_target[a] += tau / max(float(self.robot.kp[a]), 1e-9)

    # --- phases -------------------------------------------------------------------------------
    def _advance(self, dt: float, xi: np.ndarray, feet_now, loads) -> None:
        p = self.params
        self.t += dt
        self.t_phase += dt
        if self.phase == "stand":
            both = hull(np.vstack([self.sole_polygon(self.feet[0]), self.sole_polygon(self.feet[1])]))
            c = both.mean(0)
            if p.capture_step and clamp_to_polygon(xi, c + p.capture_at * (both - c))[1]:
                # a capture step: the foot nearer the DCM carries, the other steps where the DCM says
                d = [float(np.linalg.norm(xi - self.sole_center(f))) for f in self.feet]
                self.support = int(np.argmin(d))
                self.nominal = self._next_foothold(self.support, self.feet[self.support], self.cmd)
                self.target = self.nominal.copy()
                self.captures += 1
                self.capturing = True
                self._begin_ss()
            elif self.moving:
                self.support = self._first_support()
                self.phase, self.t_phase = "ds0", 0.0
                self._xi_start = xi.copy()
                self.nominal = self._next_foothold(self.support, self.feet[self.support], self.cmd)
                self.target = self.nominal.copy()
        elif self.phase == "ds0":
            self.nominal = self._next_foothold(self.support, self.feet[self.support], self.cmd)
            self.target = self.nominal.copy()
            if self.t_phase >= p.ds_first - 1e-9:
                self._begin_ss()
        elif self.phase == "ss":
            if self.ss_left > 1e-9:
                self.swing_s = min(1.0, self.swing_s + dt * (1.0 - self.swing_s) / self.ss_left)
                self.ss_left = max(self.ss_left - dt, 0.0)
            sw = 1 - self.support
            early = self.swing_s > p.early_after and loads[sw] > p.early_load * self.robot.total_mass * G
            if self.swing_s >= 1.0 - 1e-9 or early:  # touchdown (planned, or the swing foot already carries)
                sw = 1 - self.support
                landed = feet_now[sw][0]
                self.events.append(
                    {
                        "step": self.step,
                        "side": sw,
                        "t_s": self.t,
                        "planned": (float(self.target.xy[0]), float(self.target.xy[1])),
                        "landed": (float(landed.xy[0]), float(landed.xy[1])),
                        "adjust": (float(self.adjust[0]), float(self.adjust[1])),
                        "cut": bool(self.step_cut),
                        "early": bool(early and self.swing_s < 1.0 - 1e-9),
                        "retimed": bool(self.retimed),
                    }
                )
                self.feet[sw] = Foot(landed.xy, landed.yaw)
                if self.moving:  # the feet's midpoint moved half the swing foot's travel: the walked distance
                    heading = rot(self.feet[self.support].yaw).T
                    moved = heading @ (landed.xy - self.swing_from.xy) / 2.0
                    turned = wrap(landed.yaw - self.swing_from.yaw) / 2.0
                    self.deficit += self.cmd * p.period - np.array([moved[0], moved[1], turned])
                    self.speed_trim = np.clip(p.speed_gain * self.deficit / p.period, -TRIM, TRIM)
                self.speed_trim = np.where(np.abs(self.cmd) > 1e-6, self.speed_trim, 0.0)
                self.deficit = np.where(np.abs(self.cmd) > 1e-6, self.deficit, 0.0)
                self.step += 1
                self.phase, self.t_phase = "ds", 0.0
        elif self.phase == "ds":
            if self.t_phase >= p.ds - 1e-9:
                new_support = 1 - self.support
                both = hull(np.vstack([self.sole_polygon(self.feet[0]), self.sole_polygon(self.feet[1])]))
                if not self.moving and self._closed() and not clamp_to_polygon(xi, both)[1]:
                    self.phase, self.t_phase, self.support = "stand", 0.0, -1
                    self.capturing = False
                else:
                    if p.same_foot and self._toward(xi, new_support) < -p.same_foot_at:
                        new_support = (
                            self.support
                        )  # the DCM stayed on the old support's side: the unloaded foot steps again
                        self.repeats += 1
                    self.support = new_support
                    self.nominal = self._next_foothold(self.support, self.feet[self.support], self.cmd)
                    self.target = self.nominal.copy()
                    self._begin_ss()

    def _toward(self, xi: np.ndarray, side: int) -> float:
        """How far ``xi`` lies from the feet's midline toward foot ``side``, sideways in its frame [m]."""
        f = self.feet[side]
        mid = self._mid()
        return SIDE_SIGN[side] * float((rot(f.yaw).T @ (xi - mid))[1])

    def _begin_ss(self) -> None:
        self.phase, self.t_phase = "ss", 0.0
        self.ss_left, self.swing_s, self.retimed = self.params.ss, 0.0, False
        self.capturing = self.capturing and not self.moving  # a velocity command ends the recovery
        self._short_ticks = 0
        self.swing_from = self.feet[1 - self.support].copy()

    def _first_support(self) -> int:
        c = self.cmd
        if abs(c[1]) > 1e-6:
            return 1 if c[1] > 0 else 0  # step toward vy first: the left foot swings for +vy
        if abs(c[2]) > 1e-6:
            return 1 if c[2] > 0 else 0
        return 0  # the right foot swings first

    def _closed(self) -> bool:
        a, b = self.feet
        local = rot(a.yaw).T @ (b.xy - a.xy)
        return abs(local[0]) < 0.02 and abs(wrap(b.yaw - a.yaw)) < 0.05

    # --- pose ---------------------------------------------------------------------------------
    def _foot_targets(self) -> list:
        p = self.params
        out = []
        for side in (0, 1):
            f = self.feet[side]
            z = self.ground
            if self.phase == "ss" and side == 1 - self.support:
                s = self.swing_s
                h = 0.5 * (1 - math.cos(math.pi * min(s / 0.9, 1.0)))
                a, b = self.swing_from, self.target
                xy = a.xy + h * (b.xy - a.xy)
                yaw = a.yaw + h * wrap(b.yaw - a.yaw)
                z = self.ground + (p.capture_height if self.capturing else p.step_height) * math.sin(math.pi * s)
                out.append((np.array([xy[0], xy[1], z]), yaw))
            else:
                out.append((np.array([f.xy[0], f.xy[1], z]), f.yaw))
        return out

    def _tilt(self) -> float:
        """Tilt of the measured pelvis from upright [deg]."""
        w, x, y, z = self._base[1]
        up = 1.0 - 2.0 * (x * x + y * y)  # z of the body's z axis
        return math.degrees(math.acos(max(-1.0, min(1.0, up))))

    def _upright_quat(self, yaw: float) -> np.ndarray:
        """The commanded pelvis orientation: heading ``yaw`` and the measured tilt fed back (``k_tilt``), so the
        stance leg's PD leans the pelvis back toward upright harder than the tilt leans it away."""
        qy = yaw_quat(yaw)
        k = self.params.k_tilt
        lean = np.array([*self.lean, 0.0])  # the hip strategy's lean, held against the tilt feedback
        if (k <= 0.0 and not self.lean.any()) or not hasattr(self, "_base"):
            return qy
        conj = np.array([qy[0], -qy[1], -qy[2], -qy[3]])
        tilt = np.zeros(4)
        mujoco.mju_mulQuat(tilt, conj, self._base[1])
        vel = np.zeros(3)
        mujoco.mju_quat2Vel(vel, tilt, 1.0)
        vel[2] = 0.0
        corr = lean + np.clip(-k * (vel - lean), -self.params.tilt_clip, self.params.tilt_clip)
        angle = float(np.linalg.norm(corr))
        if angle < 1e-9:
            return qy
        qc = np.zeros(4)
        mujoco.mju_axisAngle2Quat(qc, corr / angle, angle)
        out = np.zeros(4)
        mujoco.mju_mulQuat(out, qy, qc)
        return out

    def _pose(self, targets, target) -> None:
        yaw = targets[0][1] + 0.5 * wrap(targets[1][1] - targets[0][1])
        self.heading = yaw
        quat = self._upright_quat(yaw)
        pelvis = np.array([*(target - self.com_offset), self.pelvis_z])
        if getattr(self, "_pelvis", None) is not None:
            pelvis[:2] = self._pelvis[:2] + (target - self._pelvis_com)
        for it in range(3):
            self.ik.set_pelvis(pelvis, quat)
            ok = True
            for i, leg in enumerate(self.legs):
                pos, fy = targets[i]
                res = self.ik.solve(leg, pos, yaw_quat(fy), q0=self.q_legs[i])
                if res.converged:
                    self.q_legs[i] = res.q
                ok = ok and res.converged
                self.ik.data.qpos[list(leg.qadr)] = self.q_legs[i]
            mujoco.mj_kinematics(self.robot.model, self.ik.data)
            mujoco.mj_comPos(self.robot.model, self.ik.data)
            model_com = self.ik.data.subtree_com[self.robot.root_body, :2].copy()
            if it == 2:
                break
            pelvis[:2] += target - model_com
        self._pelvis, self._pelvis_com = pelvis, model_com
        if self.phase == "ss" and (
            self.capturing or self._tilt() > self.params.swing_measured_deg
        ):  # tilted (or catching a push): the swing foot to its world target from where the pelvis is
            sw = 1 - self.support
            leg = self.legs[sw]
            self.ik.set_pelvis(*self._base)
            pos, fy = targets[sw]
            res = self.ik.solve(leg, pos, yaw_quat(fy), q0=self.q_legs[sw])
            if res.converged:
                self.q_legs[sw] = res.q
            ok = ok and res.converged
        self.ik_ok = ok
        q = self.q_target.copy()
        for i, leg in enumerate(self.legs):
            q[list(leg.act)] = self.q_legs[i]
        self.q_target = q

    # --- what the Lab shows -------------------------------------------------------------------
    PHASE_CODE = {"ds0": 0.0, "ds": 0.0, "ss": 1.0, "stand": 2.0}

    def preview(self, n: int = 3) -> list:
        """Planned footholds ``[x, y, yaw, side]``: the swing target, then ``n - 1`` nominal steps after it."""
        if self.phase == "stand" or self.target is None:
            return []
        out = []
        if self.phase in ("ss", "ds0"):
            s, f = 1 - self.support, self.target
        else:
            s, f = 1 - self.support, self.feet[1 - self.support]
        out.append([float(f.xy[0]), float(f.xy[1]), f.yaw, s])
        for _ in range(n - 1):
            if not self.moving:
                break
            f = self._next_foothold(s, f, self.cmd)
            s = 1 - s
            out.append([float(f.xy[0]), float(f.xy[1]), f.yaw, s])
        return out

    def extras(self) -> dict:
        """The controller's state for the Lab's curves and overlays (floats [m, rad]; lists of points)."""
        st = self.state
        if not st:
            return {}
        xi, com = st["xi"], st["com"]
        return {
            "controller": "feedback",
            "dcm_x": float(xi[0]),
            "dcm_y": float(xi[1]),
            "dcm_ref_x": float(self._xi_ref[0]),
            "dcm_ref_y": float(self._xi_ref[1]),
            "zmp_cmd_x": float(self._zmp_star[0]),
            "zmp_cmd_y": float(self._zmp_star[1]),
            "zmp_plan_x": float(self._p_ref[0]),
            "zmp_plan_y": float(self._p_ref[1]),
            "com_x": float(com[0]),
            "com_y": float(com[1]),
            "com_plan_x": float(self.c_cmd[0]),
            "com_plan_y": float(self.c_cmd[1]),
            "phase": self.PHASE_CODE[self.phase],
            "phase_name": self.phase,
            "step": float(self.step),
            "support": float(self.support),
            "saturated": float(self.saturated),
            "step_adjust_x": float(self.adjust[0]),
            "step_adjust_y": float(self.adjust[1]),
            "cmd_vx": float(self.cmd[0]),
            "cmd_vy": float(self.cmd[1]),
            "cmd_yaw_rate": float(self.cmd[2]),
            "heading_deg": math.degrees(self.heading),
            "polygon": [[round(float(x), 4), round(float(y), 4)] for x, y in self._poly],
            "footsteps": [[round(v, 4) for v in f[:3]] + [f[3]] for f in self.preview()],
            "landed": [[round(e["landed"][0], 4), round(e["landed"][1], 4), e["side"]] for e in self.events[-6:]],
        }
