CREATE TABLE metrics (model VARCHAR, split VARCHAR, metric VARCHAR, group_by VARCHAR, group_value VARCHAR,
  value DOUBLE, n BIGINT, ci_low DOUBLE, ci_high DOUBLE);
