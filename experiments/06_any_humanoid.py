"""Any humanoid out of the box: stand, push and squat on the generated family (and any model you pass).

Writes the test family (``lab.robots.family``: 0.5x-2x size, 5-80 kg, 3-DoF waists, light wrists and
fingers, mimic grippers, a toe-down single-ankle mesh foot, MJCF with and without actuators,
``actuatorfrcrange`` and position servos) and runs :func:`lab.runtime.trials.run_trial` for every model,
mode (stand 10 s, push 10 s at the built-in robot's delta-v for the model's mass, squat 4 cycles) and
engine (MuJoCo; PyBullet for URDFs), with no sidecar: gains, limits, pose, spawn and balance come from the
model (``lab.robots.tuning``). ``--baseline`` also runs the name-table method the lab used before
(``gain_method: names``), to show what the model-derived method changes. Writes under ``--out``:

- ``results.json`` / ``results.csv``: one row per run (stand error, tilt, fall time, depth, steps/s);
- ``table.md``: the README table;
- ``any_humanoid.png``: stand error and tilt per model and engine, and which runs fell.

    python experiments/06_any_humanoid.py [--models tiny,heavy] [--extra PATH ...] [--baseline] [--out results/06_any_humanoid]
"""

import argparse
import csv
import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import lab  # noqa: E402, F401  (EGL before mujoco)
from lab.errors import LabError  # noqa: E402
from lab.robots.family import FAMILY, write_family  # noqa: E402
from lab.robots.model import load_robot  # noqa: E402
from lab.runtime.trials import run_trial  # noqa: E402

MODES = ("stand", "push", "squat")


def run_model(path: Path, method: str, engines) -> list[dict]:
    if method == "names":
        Path(str(path) + ".lab.json").write_text('{"gain_method": "names"}')
    try:
        robot = load_robot(path)
    finally:
        Path(str(path) + ".lab.json").unlink(missing_ok=True)
    rows = []
    for engine in engines:
        if engine == "pybullet" and robot.kind != "urdf":
            continue
        for mode in MODES:
            try:
                t = run_trial(robot, mode, engine)
                row = {**t.to_dict(), "method": method, "mass": round(robot.total_mass, 2), "nu": len(robot.qadr)}
            except LabError as exc:
                row = {"model": path.name, "engine": engine, "mode": mode, "method": method, "error": exc.message}
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def cell(rows, model, engine, mode, method="auto") -> str:
    r = next(
        (r for r in rows if (r["model"], r["engine"], r["mode"], r["method"]) == (model, engine, mode, method)), None
    )
    if r is None:
        return "–"
    if "error" in r:
        return "error"
    if r["fell_at"] is not None:
        return f"fell {r['fell_at']:.1f} s"
    if mode == "stand":
        return f"{r['pos_err_m'] * 1000:.1f} mm / {r['tilt_deg']:.2f}°"
    if mode == "push":
        return f"ok ({r['push_n']:.0f} N, {r['tilt_deg']:.1f}°)"
    return f"ok ({r['depth_m'] * 100:.1f} cm)"


def table(rows) -> str:
    models = list(dict.fromkeys(r["model"] for r in rows))
    out = [
        "| model | kg | nu | engine | stand 10 s (pelvis / tilt) | push x3 | squat x4 | steps/s | names method: stand / push |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for m in models:
        for eng in ("mujoco", "pybullet"):
            mine = [r for r in rows if r["model"] == m and r["engine"] == eng and r["method"] == "auto"]
            if not mine:
                continue
            sps = min((r["steps_per_s"] for r in mine if "steps_per_s" in r), default=0)
            base = [r for r in rows if r["model"] == m and r["engine"] == eng and r["method"] == "names"]
            b = f"{cell(rows, m, eng, 'stand', 'names')} / {cell(rows, m, eng, 'push', 'names')}" if base else "–"
            first = mine[0]
            out.append(
                f"| {m} | {first.get('mass', '')} | {first.get('nu', '')} | {eng} | {cell(rows, m, eng, 'stand')} | "
                f"{cell(rows, m, eng, 'push')} | {cell(rows, m, eng, 'squat')} | {sps:.0f} | {b} |"
            )
    return "\n".join(out) + "\n"


def figure(rows, path: Path) -> None:
    """Per model and engine, horizontal bars: stand displacement and tilt (limits dashed), and each mode's result
    for the model-derived method beside the name-table baseline."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = list(dict.fromkeys((r["model"], r["engine"]) for r in rows if r["method"] == "auto"))
    labels = [f"{m.rsplit('.', 1)[0]} · {'MuJoCo' if e == 'mujoco' else 'PyBullet'}" for m, e in keys]
    y = list(range(len(keys)))[::-1]

    def get(model, engine, mode, method="auto"):
        return next(
            (r for r in rows if (r["model"], r["engine"], r["mode"], r["method"]) == (model, engine, mode, method)),
            None,
        )

    fig, ax = plt.subplots(1, 3, figsize=(15, 0.36 * len(keys) + 1.8), sharey=True)
    for k, (field, scale, limit, xmax, title) in enumerate(
        (
            ("pos_err_m", 1000, 10, 12, "stand 10 s: largest pelvis displacement [mm]"),
            ("tilt_deg", 1, 2, 2.4, "stand 10 s: largest torso tilt [deg]"),
        )
    ):
        for yi, (m, e) in zip(y, keys):
            r = get(m, e, "stand")
            if r is None or "error" in r:
                continue
            if r["fell_at"] is not None:
                ax[k].text(0.02 * xmax, yi, f"fell at {r['fell_at']:.1f} s", va="center", color="#d9534f", fontsize=8)
                continue
            ax[k].barh(yi, min(r[field] * scale, xmax), color="#4c9be8" if e == "mujoco" else "#e8834c")
        ax[k].axvline(limit, color="#d9534f", ls="--", lw=1)
        ax[k].set_xlim(0, xmax)
        ax[k].set_title(title, fontsize=10)
    modes = ("stand", "push", "squat")
    for yi, (m, e) in zip(y, keys):
        for c, mode in enumerate(modes):
            for method, dx, size in (("auto", 0.0, 90), ("names", 0.25, 40)):
                r = get(m, e, mode, method)
                if r is None:
                    continue
                ok = "error" not in r and r.get("ok")
                ax[2].scatter(c + dx, yi, s=size, marker="o" if ok else "x", color="#5cb85c" if ok else "#d9534f")
    ax[2].set_xticks([0, 1, 2], ["stand 10 s", "push x3", "squat x4"])
    ax[2].set_xlim(-0.4, 2.6)
    ax[2].set_title("o held, x fell: from the model (left), name tables (right)", fontsize=10)
    ax[0].set_yticks(y, labels, fontsize=8)
    fig.suptitle("Any humanoid out of the box: gains, limits, pose, spawn and balance from the model, no sidecar")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> list:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(FAMILY), help="family members (default: all)")
    ap.add_argument(
        "--extra", nargs="*", default=[], help="more single-file models (URDF/MJCF, copied), e.g. public humanoids"
    )
    ap.add_argument("--engines", default="mujoco,pybullet")
    ap.add_argument("--baseline", action="store_true", help="also run the name-table method (gain_method names)")
    ap.add_argument("--out", default=str(HERE.parent / "results" / "06_any_humanoid"))
    args = ap.parse_args(argv)
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in FAMILY]
    if unknown:
        ap.error(f"unknown family robot {unknown[0]!r}; available: {', '.join(FAMILY)}")
    for p in args.extra:
        if not Path(p).is_file():
            ap.error(f"--extra {p}: not a file")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    paths = list(write_family(out / "models", names).values())
    for p in args.extra:  # a copy: the baseline writes a sidecar beside the model
        (out / "extra").mkdir(exist_ok=True)
        paths.append(Path(shutil.copy(p, out / "extra" / Path(p).name)))
    engines = [e for e in args.engines.split(",") if e]
    rows = []
    for path in paths:
        for method in ("auto", "names") if args.baseline else ("auto",):
            rows += run_model(path, method, engines)
    (out / "results.json").write_text(json.dumps(rows, indent=1))
    keys = list(dict.fromkeys(k for r in rows for k in r))
    with open(out / "results.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    (out / "table.md").write_text(table(rows))
    figure(rows, out / "any_humanoid.png")
    print(table(rows))
    print(f"wrote {out / 'results.json'}, results.csv, table.md, any_humanoid.png")
    return rows


if __name__ == "__main__":
    main()
