"""The walking pipeline: gait geometry, foot IK, bounded LIPM, footstep planner, closed-loop walk.

Each stage is a module with one job; :func:`lab.walking.walk.run_walk` ties them together and is
what ``experiments/03_walk.py``, the ``walk`` mode of the Lab and the stability scans call.
"""
