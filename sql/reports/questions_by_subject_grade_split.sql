-- Questions per subject, grade and split (the shape of the paper's Table 1, by grade).
SELECT subject,
       coalesce(grade, '(none)') AS grade,
       count(*) FILTER (WHERE split = 'train') AS train,
       count(*) FILTER (WHERE split = 'valid') AS valid,
       count(*) FILTER (WHERE split = 'test')  AS test,
       count(*) AS total
FROM questions
GROUP BY ALL
ORDER BY subject, grade;
