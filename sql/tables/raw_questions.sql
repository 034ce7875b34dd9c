CREATE TABLE raw_questions (source VARCHAR, source_key VARCHAR, subject VARCHAR, grade VARCHAR, skill VARCHAR,
  problem VARCHAR, problem_image VARCHAR, choices VARCHAR[], choice_images VARCHAR[], answer_idx BIGINT,
  source_split VARCHAR, extra VARCHAR);
