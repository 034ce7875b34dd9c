CREATE TABLE dataset_statistics (subject VARCHAR, skills BIGINT, questions BIGINT, avg_answers DOUBLE,
  train BIGINT, valid BIGINT, test BIGINT);
