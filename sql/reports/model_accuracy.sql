-- Test accuracy (%) per model: per subject, and the macro average the paper reports, with 95% intervals.
SELECT model, group_by, group_value, round(value, 1) AS accuracy,
       round(ci_low, 1) AS ci_low, round(ci_high, 1) AS ci_high, n
FROM metrics
WHERE metric = 'accuracy' AND split = 'test' AND group_by IN ('subject', 'macro')
ORDER BY model, group_by DESC, group_value;
