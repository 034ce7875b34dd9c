-- Near duplicates whose pictures were judged the same only at the smaller picture's own pixel
-- (figures under ~200 px): there a label of a few small letters is not read, so these merges are
-- the ones to look at first; largest cluster of unmatched ink first.
SELECT source_key, kept_question_id,
       json_extract(evidence, '$.ink.pixel')::DOUBLE AS pixel,
       greatest(json_extract(evidence, '$.ink.cluster_a')::INT,
                json_extract(evidence, '$.ink.cluster_b')::INT) AS largest_cluster
FROM duplicates
WHERE json_extract(evidence, '$.ink.pixel') IS NOT NULL
ORDER BY largest_cluster DESC, source_key;
