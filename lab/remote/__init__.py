"""Remote state: the state server (port 8766), its protocol, a client, the CLI and the Lab's monitor.

``protocol`` and ``monitor`` import no web framework; ``server`` is the state server's web layer.
"""
