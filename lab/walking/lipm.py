"""The linear inverted pendulum (Kajita's 3D LIPM), solved for its bounded solution.

With the centre of mass at a constant height ``z_c`` each horizontal axis obeys
``x'' = omega^2 (x - p)``, ``omega = sqrt(g / z_c)``, where ``p`` is the ZMP. The system has one
stable and one unstable mode, so integrating it in either direction from two boundary values
amplifies every error by ``e^(omega t)``. The bounded solution separates the modes:

1. the capture point ``xi = x + x'/omega`` obeys ``xi' = omega (xi - p)``; swept **backward**
   from ``xi(T) = p(T)`` (the final ZMP) it is stable: ``xi_k = p_k + (xi_{k+1} - p_k) e^(-omega dt)``,
   exact for a ZMP held constant over each sample;
2. the centre of mass obeys ``x' = omega (xi - x)``; swept **forward** from its initial value it
   is stable too (exact for ``xi`` linear over each sample).

:func:`naive_backward` is the method this avoids: integrate ``x'' = omega^2 (x - p)`` backward
from ``x(T) = p(T)``, ``x'(T) = 0``; it diverges. :func:`analytic_step` is the closed-form
bounded solution for one ZMP step, used to check the sweeps. Arrays are (n,) or (n, 2) for x, y.
"""

import numpy as np

G = 9.81  # [m/s^2]


def omega(z_c: float, g: float = G) -> float:
    """Natural frequency [1/s] of a pendulum with its mass ``z_c`` [m] above the ZMP plane."""
    return float(np.sqrt(g / z_c))


def capture_point_backward(zmp: np.ndarray, dt: float, w: float) -> np.ndarray:
    """Capture point (n, ...) swept backward from the final ZMP; ``zmp`` sampled every ``dt`` [s]."""
    zmp = np.asarray(zmp, float)
    xi = np.empty_like(zmp)
    a = np.exp(-w * dt)
    xi[-1] = zmp[-1]
    for k in range(len(zmp) - 2, -1, -1):
        xi[k] = zmp[k] + (xi[k + 1] - zmp[k]) * a
    return xi


def com_forward(xi: np.ndarray, dt: float, w: float, x0) -> tuple[np.ndarray, np.ndarray]:
    """CoM position and velocity (n, ...) from the capture point, swept forward from ``x0``."""
    x = np.empty_like(xi)
    x[0] = x0
    a = np.exp(-w * dt)
    for k in range(len(xi) - 1):
        b = (xi[k + 1] - xi[k]) / dt
        x[k + 1] = xi[k + 1] - b / w + (x[k] - xi[k] + b / w) * a
    v = w * (xi - x)
    return x, v


def bounded_com(zmp: np.ndarray, dt: float, z_c: float, x0=None, g: float = G):
    """The bounded LIPM solution for a ZMP reference ``zmp`` (n,) or (n, 2) sampled every ``dt`` [s].

    Returns ``(x, v, xi)``: CoM position [m], velocity [m/s] and capture point [m], each like ``zmp``.
    ``x0`` is the initial CoM (default: the first ZMP sample, the robot at rest over it).
    """
    zmp = np.asarray(zmp, float)
    w = omega(z_c, g)
    xi = capture_point_backward(zmp, dt, w)
    x, v = com_forward(xi, dt, w, zmp[0] if x0 is None else np.asarray(x0, float))
    return x, v, xi


def zmp_of(x: np.ndarray, dt: float, z_c: float, g: float = G) -> np.ndarray:
    """The ZMP a CoM trajectory implies, ``p = x - x''/omega^2`` (finite differences; ends repeated)."""
    acc = np.zeros_like(x)
    acc[1:-1] = (x[2:] - 2 * x[1:-1] + x[:-2]) / dt**2
    acc[0], acc[-1] = acc[1], acc[-2]
    return x - acc * z_c / g


def naive_backward(zmp: np.ndarray, dt: float, z_c: float, g: float = G) -> np.ndarray:
    """CoM by integrating ``x'' = omega^2 (x - p)`` backward from ``x(T) = p(T)``, ``x'(T) = 0``.

    Semi-implicit Euler, the way it is usually first written. The stable mode of the forward
    problem is the unstable mode of the backward one, so this diverges as ``e^(omega (T - t))``.
    """
    zmp = np.asarray(zmp, float)
    w2 = g / z_c
    x = np.empty_like(zmp)
    x[-1] = zmp[-1]
    v = np.zeros_like(zmp[-1])
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(len(zmp) - 1, 0, -1):
            v = v - dt * w2 * (x[k] - zmp[k])
            x[k - 1] = x[k] - dt * v
    return x


def analytic_step(t: np.ndarray, t_step: float, p0: float, p1: float, z_c: float, g: float = G) -> np.ndarray:
    """Closed-form bounded CoM for a ZMP that jumps from ``p0`` to ``p1`` at ``t_step`` [s].

    ``x = p0 + (p1 - p0)/2 e^(omega (t - t_step))`` before the step, ``p1 - (p1 - p0)/2 e^(-omega (t - t_step))``
    after it: the CoM crosses the midpoint exactly at the step.
    """
    w = omega(z_c, g)
    t = np.asarray(t, float)
    h = 0.5 * (p1 - p0)
    return np.where(
        t < t_step, p0 + h * np.exp(w * np.minimum(t - t_step, 0.0)), p1 - h * np.exp(-w * np.maximum(t - t_step, 0.0))
    )
