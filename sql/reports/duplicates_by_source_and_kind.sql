-- Removed duplicates per source and kind (exact / near).
SELECT source, kind, count(*) AS removed
FROM duplicates
GROUP BY ALL
ORDER BY source, kind;
