CREATE TABLE predictions (model VARCHAR, question_id VARCHAR, split VARCHAR, prediction BIGINT, confidence DOUBLE,
  correct BOOLEAN, error VARCHAR, rule VARCHAR);
