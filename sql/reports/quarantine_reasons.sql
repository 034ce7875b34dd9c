-- Why records did not make it, per stage (the most frequent reasons first).
SELECT stage, reason, count(*) AS records
FROM quarantine
GROUP BY ALL
ORDER BY records DESC, stage, reason
LIMIT 50;
