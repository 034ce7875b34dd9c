CREATE TABLE images (image_hash VARCHAR, format VARCHAR, width BIGINT, height BIGINT, phash UBIGINT, path VARCHAR, size_bytes BIGINT, thumbnail BLOB,
  content_phash UBIGINT, content_thumbnail BLOB, content_box USMALLINT[], colours BLOB);
