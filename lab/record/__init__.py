"""Recording runs to MCAP files, reading them back, and replaying them bit-exactly.

- :mod:`lab.record.format`: the topics, their JSON schemas, the binary layouts of the exact MuJoCo state;
- :mod:`lab.record.recorder`: the simulation side (called by the runner every step, lock held);
- :mod:`lab.record.process`: the file as the simulation sees it (a bounded queue fed to the writer process);
- :mod:`lab.record.writer`: the writer process (JSON, MCAP records, zstd; always a finished file);
- :mod:`lab.record.messages`: the JSON messages of a sample (joint states, base, tf, contacts and their scene, command);
- :mod:`lab.record.mcap_out`: the MCAP file the writer writes (one ``struct`` call per message);
- :mod:`lab.record.store`: a service's recordings folder (start, stop, list, delete);
- :mod:`lab.record.reader`: :func:`open_recording`: metadata, topics, ``read(topic, t0, t1)``, ``state_at(t)``;
- :mod:`lab.record.replay`: :func:`replay`: re-simulate and compare (``experiments/replay.py``).
"""

from lab.record.reader import Recording, open_recording

__all__ = ["Recording", "open_recording"]
