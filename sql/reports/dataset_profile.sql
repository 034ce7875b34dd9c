-- The dataset's CogME profile: how often each sub-component is asked (% of questions).
SELECT component, sub_component, round(value, 1) AS percent_of_questions, n
FROM profiles
WHERE profile_of = 'dataset' AND measure = 'frequency' AND scope = 'all'
ORDER BY component, value DESC;
