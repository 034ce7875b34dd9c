-- The skills with the fewest kept questions.
SELECT subject, skill, count(*) AS questions,
       count(*) FILTER (WHERE split = 'test') AS test
FROM questions
GROUP BY ALL
ORDER BY questions, subject, skill
LIMIT 20;
