"""A polite, resumable, generic web crawler on requests, with a content-addressed raw store.

``crawl(CrawlConfig(base_url=...), store_dir)`` fetches a site into ``store_dir``;
``RawStore(store_dir)`` reads it back (``iter_pages``, ``get_body``, ``failures``, ...).
"""

from pipelines.ingest.crawl.config import CrawlConfig, CrawlConfigError
from pipelines.ingest.crawl.engine import CrawlReport, crawl, parse_retry_after
from pipelines.ingest.crawl.raw_store import RawStore, RawStoreError, UrlRecord

__all__ = [
    "CrawlConfig",
    "CrawlConfigError",
    "CrawlReport",
    "RawStore",
    "RawStoreError",
    "UrlRecord",
    "crawl",
    "parse_retry_after",
]
