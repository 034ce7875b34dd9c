"""The bundled demo quiz site: a deterministic stand-in for IXL, ProProfs and Triviaplaza.

- ``generator``: ``SiteConfig``, ``DemoSite`` (O(1) random access to questions),
  ``DemoQuestion``, ``render_image``; catalog of 448 skills shaped like the STEM paper's.
- ``server``: ``start_site(config) -> RunningSite`` (threaded HTTP/1.1 on loopback) and
  ``serve_forever(config, port)``.
- ``truth``: ``write_truth(config, path)`` (JSON Lines, format in its docstring),
  ``read_truth(path)``.
- ``faults``: the deterministic fault plan for ``SiteConfig(faults=True)``.
- ``layouts``: the three page layouts; ``drawing``: the Pillow drawings.
"""

from pipelines.ingest.demo_site.generator import DemoQuestion, DemoSite, SiteConfig, SkillInfo, render_image
from pipelines.ingest.demo_site.imagespec import ImageSpec
from pipelines.ingest.demo_site.server import RunningSite, serve_forever, start_site
from pipelines.ingest.demo_site.truth import read_truth, write_truth

__all__ = ["DemoQuestion", "DemoSite", "ImageSpec", "RunningSite", "SiteConfig", "SkillInfo", "read_truth",
           "render_image", "serve_forever", "start_site", "write_truth"]
