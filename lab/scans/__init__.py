"""Parameter scans: kinds (what a point computes), executors (where it runs), the on-disk store
and the manager that runs scans in the background. The web layer is :mod:`lab.web.scans_page`."""
